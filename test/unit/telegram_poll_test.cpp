// The Telegram poll connector's source over a scripted getUpdates and an
// in-memory sink: what a getUpdates answer means, the offset confirmed only
// after every Update of a batch is settled, 429's retry_after, a refused
// token, transport errors and stopping.

#include <chrono>
#include <deque>
#include <mutex>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "runtime/telegram_poll.hpp"
#include "test/support/fake_connector_sink.hpp"

namespace butlers {
namespace {

using namespace std::chrono_literals;
using test::fake_connector_sink;

http_response telegram(int status, std::string body) {
  http_response r;
  r.status = status;
  r.body = std::move(body);
  return r;
}

http_response result_of(const std::string& updates) {
  return telegram(200, R"({"ok":true,"result":[)" + updates + "]}");
}

std::string message(int64_t update_id, const std::string& text) {
  return R"({"update_id":)" + std::to_string(update_id)
         + R"(,"message":{"message_id":1,"from":{"id":7,"is_bot":false,)"
           R"("first_name":"A"},"chat":{"id":7,"type":"private"},)"
           R"("date":1441645532,"text":")"
         + text + R"("}})";
}

// -- reading answers ----------------------------------------------------------

TEST(GetUpdates, AnOkAnswerGivesEveryUpdateAsText) {
  auto a = read_get_updates(
    result_of(message(5, "a") + "," + R"({"update_id":6,"poll":{}})"));
  ASSERT_EQ(a.what, get_updates_answer::kind::updates);
  ASSERT_EQ(a.updates.size(), 2u);
  EXPECT_NE(a.updates[1].find("\"poll\""), std::string::npos);
  EXPECT_TRUE(read_get_updates(result_of("")).updates.empty());
}

TEST(GetUpdates, ARefusedTokenIsFatal) {
  for (int status : {401, 404}) {
    auto a = read_get_updates(telegram(
      status, R"({"ok":false,"error_code":401,"description":"Unauthorized"})"));
    EXPECT_EQ(a.what, get_updates_answer::kind::fatal) << status;
    EXPECT_NE(a.reason.find(std::to_string(status)), std::string::npos);
  }
}

TEST(GetUpdates, TooManyRequestsCarriesRetryAfter) {
  auto a = read_get_updates(
    telegram(429, R"({"ok":false,"error_code":429,"description":)"
                  R"("Too Many Requests: retry after 7",)"
                  R"("parameters":{"retry_after":7}})"));
  EXPECT_EQ(a.what, get_updates_answer::kind::retry);
  EXPECT_EQ(a.retry_after, 7s);
  auto header_only = telegram(429, "slow down");
  header_only.headers.emplace_back("retry-after", "3");
  EXPECT_EQ(read_get_updates(header_only).retry_after, 3s);
}

TEST(GetUpdates, EverythingElseIsRetriedAfterABackoff) {
  http_response down;
  down.failure = http_failure::connect;
  down.error = "Connection refused";
  for (auto& r :
       {down, telegram(502, "<html>Bad Gateway</html>"),
        telegram(409, R"({"ok":false,"error_code":409,"description":)"
                      R"("Conflict: terminated by other getUpdates request"})"),
        telegram(200, R"({"ok":false})"), telegram(200, R"({"ok":true})"),
        telegram(200, R"({"ok":true,"result":{}})"), telegram(200, "[]"),
        telegram(200, "")}) {
    auto a = read_get_updates(r);
    EXPECT_EQ(a.what, get_updates_answer::kind::retry) << r.body;
    EXPECT_FALSE(a.retry_after);
    EXPECT_FALSE(a.reason.empty());
  }
}

TEST(GetUpdates, TheRequestAsksForTheThreeKindsAndButtonPressesFromTheOffset) {
  auto req = get_updates_request("http://127.0.0.1:9", "123:abc", 42, 30, 100);
  EXPECT_EQ(req.method, "POST");
  EXPECT_EQ(req.url, "http://127.0.0.1:9/bot123:abc/getUpdates");
  EXPECT_EQ(req.body, R"({"offset":42,"timeout":30,"limit":100,)"
                      R"("allowed_updates":["message","edited_message",)"
                      R"("channel_post","callback_query"]})");
  EXPECT_GT(req.timeout, 30s) << "longer than the long poll";
  auto first = get_updates_request("http://x", "t", 0, 0, 1);
  EXPECT_EQ(first.body.find("offset"), std::string::npos);
}

// -- the source ---------------------------------------------------------------

/// A scripted getUpdates: answers queued responses in order, then holds
/// each call like an empty long poll until cancelled.
class scripted_telegram {
 public:
  void queue(http_response r) {
    std::lock_guard<std::mutex> guard{mtx_};
    answers_.push_back(std::move(r));
  }

  http_response fetch(const http_request& req, const std::atomic<bool>* stop) {
    {
      std::lock_guard<std::mutex> guard{mtx_};
      requests_.push_back(req.body);
      log_.push_back("fetch " + offset_of(req.body));
      if (!answers_.empty()) {
        auto r = answers_.front();
        answers_.pop_front();
        return r;
      }
    }
    while (!stop->load())
      std::this_thread::sleep_for(2ms);
    http_response r;
    r.failure = http_failure::cancelled;
    return r;
  }

  std::vector<std::string> requests() const {
    std::lock_guard<std::mutex> guard{mtx_};
    return requests_;
  }

  /// Fetches and submissions in the order they happened.
  std::vector<std::string> log() const {
    std::lock_guard<std::mutex> guard{mtx_};
    return log_;
  }

  void note(std::string what) {
    std::lock_guard<std::mutex> guard{mtx_};
    log_.push_back(std::move(what));
  }

  static std::string offset_of(const std::string& body) {
    auto at = body.find("\"offset\":");
    if (at == std::string::npos)
      return "none";
    return body.substr(at + 9, body.find(',', at) - at - 9);
  }

 private:
  mutable std::mutex mtx_;
  std::deque<http_response> answers_;
  std::vector<std::string> requests_;
  std::vector<std::string> log_;
};

class TelegramPoll : public ::testing::Test {
 protected:
  void TearDown() override {
    stop();
  }

  void start() {
    telegram_poll_source::options o;
    o.name = "tg";
    o.api_base = "http://fake";
    o.token = "123:abc";
    o.endpoint_identity = "mybot";
    o.batch = 2;
    o.backoff = 5ms;
    o.max_backoff = 20ms;
    o.fetch = [this](const http_request& req, const std::atomic<bool>* stop) {
      return tg_.fetch(req, stop);
    };
    source_ = std::make_unique<telegram_poll_source>(std::move(o));
    thread_ = std::thread{[this] {
      source_->run(sink_);
      finished_ = true;
    }};
  }

  void stop() {
    sink_.stop().raise();
    if (thread_.joinable())
      thread_.join();
  }

  bool fetched(size_t n) {
    return sink_.wait(
      [&] {
        return tg_.requests().size() >= n;
      },
      10s);
  }

  scripted_telegram tg_;
  fake_connector_sink sink_;
  std::unique_ptr<telegram_poll_source> source_;
  std::thread thread_;
  std::atomic<bool> finished_{false};
};

TEST_F(TelegramPoll, SubmitsTheTakenKindsAndConfirmsPastTheWholeBatch) {
  tg_.queue(result_of(message(10, "one") + "," + message(11, "two") + ","
                      + R"({"update_id":12,"callback_query":{"id":"q"}},)"
                      + message(13, "three") + ","
                      + R"({"update_id":14,"message":{"text":"no chat"}})"));
  start();
  ASSERT_TRUE(fetched(2));
  auto envelopes = sink_.envelopes();
  ASSERT_EQ(envelopes.size(), 3u);
  EXPECT_NE(envelopes[0].find(R"("external_event_id":"10")"),
            std::string::npos);
  EXPECT_NE(envelopes[2].find(R"("external_event_id":"13")"),
            std::string::npos);
  EXPECT_EQ(sink_.batch_sizes(), (std::vector<size_t>{2, 1}))
    << "max_in_flight at a time, in order";
  EXPECT_EQ(sink_.ignored_drops(), 1u);
  EXPECT_EQ(sink_.invalid_drops(), 1u);
  auto reqs = tg_.requests();
  EXPECT_EQ(scripted_telegram::offset_of(reqs[0]), "none");
  EXPECT_EQ(scripted_telegram::offset_of(reqs[1]), "15");
}

TEST_F(TelegramPoll, TheOffsetWaitsUntilEveryUpdateIsStored) {
  tg_.queue(result_of(message(20, "a") + "," + message(21, "b")));
  sink_.decide([this](const submission& s, size_t attempt) {
    auto id = s.envelope.find(R"("external_event_id":"21")")
                  != std::string::npos
                ? "21"
                : "20";
    tg_.note(std::string{"submit "} + id + " #" + std::to_string(attempt));
    std::optional<submit_outcome> o;
    if (std::string{id} == "21" && attempt < 3)
      o = submit_outcome{submit_status::unavailable, {}, "database down"};
    return o;
  });
  start();
  ASSERT_TRUE(fetched(2));
  EXPECT_EQ(tg_.log(), (std::vector<std::string>{"fetch none", "submit 20 #1",
                                                 "submit 21 #1", "submit 21 #2",
                                                 "submit 21 #3", "fetch 22"}));
}

TEST_F(TelegramPoll, TooManyRequestsWaitsRetryAfter) {
  tg_.queue(telegram(429, R"({"ok":false,"error_code":429,)"
                          R"("description":"Too Many Requests: retry after 1",)"
                          R"("parameters":{"retry_after":1}})"));
  auto before = std::chrono::steady_clock::now();
  start();
  ASSERT_TRUE(fetched(2));
  EXPECT_GE(std::chrono::steady_clock::now() - before, 1s);
  EXPECT_EQ(sink_.failures(), 1u);
}

TEST_F(TelegramPoll, ARefusedTokenStopsTheSourceAfterOneCall) {
  tg_.queue(
    telegram(401,
             R"({"ok":false,"error_code":401,"description":"Unauthorized"})"));
  start();
  ASSERT_TRUE(sink_.wait(
    [&] {
      return finished_.load();
    },
    10s));
  EXPECT_EQ(tg_.requests().size(), 1u);
  EXPECT_TRUE(sink_.submitted().empty());
}

TEST_F(TelegramPoll, TransportErrorsAndServerErrorsBackOffAndRetry) {
  http_response down;
  down.failure = http_failure::connect;
  tg_.queue(down);
  tg_.queue(telegram(500, R"({"ok":false,"error_code":500})"));
  tg_.queue(result_of(message(30, "after")));
  start();
  ASSERT_TRUE(fetched(4));
  EXPECT_EQ(sink_.failures(), 2u);
  EXPECT_EQ(sink_.envelopes().size(), 1u);
  EXPECT_EQ(scripted_telegram::offset_of(tg_.requests()[3]), "31");
}

TEST_F(TelegramPoll, StopsPromptlyDuringALongPoll) {
  start();
  ASSERT_TRUE(fetched(1));
  auto before = std::chrono::steady_clock::now();
  stop();
  EXPECT_LT(std::chrono::steady_clock::now() - before, 2s);
  EXPECT_TRUE(finished_);
}

} // namespace
} // namespace butlers
