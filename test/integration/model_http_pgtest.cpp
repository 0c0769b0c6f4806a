// The HTTP model runtimes (`kind = "openai"` and `kind = "anthropic"`)
// against real node processes, real PostgreSQL and the fake model server
// over loopback (test/support/fake_model_server, driven by the recorded
// streams in test/fixtures): a steer during a call reaches the next call
// as a user message, interrupt and cancel abort the stream under way
// within a second, a thread subscriber sees the deltas and then the
// transcript entry, 429 + Retry-After is honoured, a cut stream is
// retried, and a 4xx other than 429 fails at once; tools called natively
// (OpenAI `tool_calls`, Anthropic `tool_use`) run through the node's tool
// server and their results reach the next call in the provider's shape.

#include <algorithm>
#include <chrono>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <pqxx/pqxx>

#include "runtime/json.hpp"
#include "test/support/fake_model_server.hpp"
#include "test/support/http_client.hpp"
#include "test/support/node_fixture.hpp"
#include "test/support/poll.hpp"
#include "test/support/sse_client.hpp"

namespace butlers::test {
namespace {

using namespace std::chrono_literals;
using clock = std::chrono::steady_clock;

/// The conversation a call sent: (role, content), system prompt first; a
/// content that is not a string (tool turns) as its JSON text.
using messages = std::vector<std::pair<std::string, std::string>>;

messages messages_of(const fake_model_call& call) {
  messages out;
  rapidjson::Document doc;
  if (json::parse(call.body, doc) || !doc.IsObject())
    return out;
  if (doc.HasMember("system") && doc["system"].IsString())
    out.emplace_back("system", doc["system"].GetString());
  for (auto& m : doc["messages"].GetArray()) {
    auto& c = m["content"];
    out.emplace_back(m["role"].GetString(), c.IsString()
                                              ? std::string{c.GetString()}
                                              : json::to_string(c));
  }
  return out;
}

/// The text the default fixture of each API streams.
std::string fixture_answer(const std::string& kind) {
  return kind == "openai" ? "Hello! How can I assist you today?"
                          : "Hello! I'm doing well, thank you for asking. How "
                            "are you doing today? Is there anything I can "
                            "help you with?";
}

class ModelHttp : public node_fixture,
                  public ::testing::WithParamInterface<std::string> {
 protected:
  /// Starts a node whose `general` butler calls the fake with the API of
  /// the test's parameter; calls are slow unless `fast`; `runtime` adds
  /// lines to its `[butler.runtime]`.
  void start(bool slow = true, const std::string& runtime = "") {
    if (slow) {
      fake_model_reply r;
      r.event_interval = 150ms;
      fake_.set_default(r);
    }
    use_database("modelhttp");
    use_files("modelhttp");
    auto config = node_head("model-test", 5, "request_timeout_ms = 10000\n")
                  + "[[butler]]\nname = \"general\"\n"
                    "max_concurrent_sessions = 4\nmax_pending = 100\n"
                    "session_timeout_s = 60\n"
                    "[butler.runtime]\nkind = \""
                  + GetParam() + "\"\nbase_url = \"" + fake_.base_url()
                  + "\"\nmodel = \"test-model\"\n"
                    "api_key_env = \"BUTLERS_TEST_MODEL_KEY\"\n"
                    "system_prompt = \"You are a test butler.\"\n"
                    "timeout_s = 30\nretries = 3\nretry_base_ms = 50\n"
                  + runtime
                  + "[[messenger.adapter]]\nkind = \"outbox\"\npath = \"" + dir_
                  + "/outbox.jsonl\"\n";
    ASSERT_TRUE(
      start_node(config, {{"BUTLERS_TEST_MODEL_KEY", "sk-test-key"}}));
  }

  struct answer {
    int status = 0;
    std::string run_id;
    std::string kind;
    std::string body;
  };

  answer turn(const std::string& thread, const std::string& message_id,
              const std::string& text, const std::string& mode = "") {
    auto r = http_->post("/v1/threads/" + thread + "/turns",
                         R"({"message_id":")" + message_id + R"(","text":")"
                           + text + "\""
                           + (mode.empty() ? "" : R"(,"mode":")" + mode + "\"")
                           + "}");
    answer a;
    a.status = r.status;
    a.body = r.body;
    rapidjson::Document doc;
    if (!json::parse(r.body, doc) && doc.IsObject()) {
      if (doc.HasMember("run_id") && doc["run_id"].IsString())
        a.run_id = doc["run_id"].GetString();
      if (doc.HasMember("kind") && doc["kind"].IsString())
        a.kind = doc["kind"].GetString();
    }
    return a;
  }

  std::string query(const std::string& sql, const std::string& run_id) {
    pqxx::connection conn{url_};
    pqxx::nontransaction tx{conn};
    auto r = tx.exec_params(sql, run_id);
    return r.empty() || r[0][0].is_null() ? std::string{}
                                          : r[0][0].as<std::string>();
  }

  std::string run_state(const std::string& run_id) {
    return query("SELECT state FROM thread_runs WHERE run_id = $1", run_id);
  }

  std::string reply_of(const std::string& run_id) {
    return query("SELECT body FROM thread_transcript WHERE run_id = $1 AND "
                 "role = 'assistant'",
                 run_id);
  }

  bool finished(const std::string& run_id) {
    auto s = run_state(run_id);
    return s == "ok" || s == "error" || s == "cancelled";
  }

  /// Waits until call `n` (0-based) is streaming: it began 400 ms ago
  /// (events come every 150 ms) and has not ended.
  bool streaming(size_t n) {
    return eventually(
      [&] {
        auto calls = fake_.calls();
        if (calls.size() <= n)
          return false;
        return !calls[n].ended && clock::now() - calls[n].received > 400ms;
      },
      10s, 5ms);
  }

  fake_model_server fake_;
};

TEST_P(ModelHttp, ASteerDuringACallReachesTheNextCallAsAUserMessage) {
  start();
  sse_client events{port_, "/v1/threads/t-steer/events"};
  ASSERT_TRUE(eventually(
    [&] {
      return events.open();
    },
    5s));
  auto first = turn("t-steer", "m1", "plan my week");
  ASSERT_EQ(first.status, 200) << first.body;
  ASSERT_TRUE(streaming(0));
  auto steer = turn("t-steer", "m2", "and book the gym");
  ASSERT_EQ(steer.status, 200) << steer.body;
  EXPECT_EQ(steer.kind, "steer");
  EXPECT_EQ(steer.run_id, first.run_id);
  ASSERT_TRUE(eventually(
    [&] {
      return finished(first.run_id);
    },
    30s));
  EXPECT_EQ(run_state(first.run_id), "ok");
  auto calls = fake_.calls();
  ASSERT_EQ(calls.size(), 2u) << "one more call for the input that arrived";
  // What the model saw: the system prompt, the request with the user's
  // text fenced as data, then (second call) its first answer and the steer
  // as a user message.
  auto one = messages_of(calls[0]);
  auto two = messages_of(calls[1]);
  ASSERT_EQ(one.size(), 2u);
  EXPECT_EQ(one[0],
            (std::pair<std::string, std::string>{"system",
                                                 "You are a test butler."}));
  EXPECT_EQ(one[1].first, "user");
  EXPECT_NE(one[1].second.find("\"plan my week\""), std::string::npos);
  ASSERT_EQ(two.size(), 4u);
  EXPECT_EQ(two[1], one[1]);
  EXPECT_EQ(two[2],
            (std::pair<std::string, std::string>{"assistant",
                                                 fixture_answer(GetParam())}));
  EXPECT_EQ(two[3].first, "user");
  EXPECT_NE(two[3].second.find("\"and book the gym\""), std::string::npos);
  for (auto& m : one)
    EXPECT_EQ(m.second.find("book the gym"), std::string::npos)
      << "the steer arrived after the first call began";
  // The key went as the API wants it.
  if (GetParam() == "openai") {
    EXPECT_EQ(calls[0].headers["authorization"], "Bearer sk-test-key");
  } else {
    EXPECT_EQ(calls[0].headers["x-api-key"], "sk-test-key");
    EXPECT_EQ(calls[0].headers["anthropic-version"], "2023-06-01");
  }
  EXPECT_EQ(reply_of(first.run_id), fixture_answer(GetParam()));
  // The subscriber saw steer.applied naming m2, deltas while the answer
  // was written, then the transcript entry of the reply.
  ASSERT_TRUE(eventually(
    [&] {
      return events.count("event: transcript") >= 3;
    },
    5s))
    << events.text();
  auto text = events.text();
  EXPECT_NE(text.find("event: steer.applied"), std::string::npos);
  EXPECT_NE(text.find(R"("message_ids":["m2"])"), std::string::npos);
  auto first_delta = text.find("event: delta");
  auto reply_entry = text.find(R"("role":"assistant")");
  ASSERT_NE(first_delta, std::string::npos) << text;
  ASSERT_NE(reply_entry, std::string::npos) << text;
  EXPECT_LT(first_delta, reply_entry) << "deltas come before the transcript";
  EXPECT_GE(events.count("event: delta"), 2u);
  EXPECT_NE(text.find(R"("text":"Hello)"), std::string::npos);
}

TEST_P(ModelHttp, InterruptStopsTheCallAndStartsTheNewInput) {
  start();
  auto first = turn("t-int", "i1", "write a long essay");
  ASSERT_EQ(first.status, 200) << first.body;
  ASSERT_TRUE(streaming(0));
  auto second = turn("t-int", "i2", "no, a haiku", "interrupt");
  ASSERT_EQ(second.status, 200) << second.body;
  EXPECT_EQ(second.kind, "start");
  auto answered = clock::now();
  ASSERT_TRUE(eventually(
    [&] {
      auto calls = fake_.calls();
      return !calls.empty() && calls[0].ended;
    },
    1s))
    << "the interrupted call's stream was not closed within 1 s";
  auto calls = fake_.calls();
  EXPECT_TRUE(calls[0].client_closed);
  EXPECT_LT(calls[0].ended_at - answered, 1s);
  ASSERT_TRUE(eventually(
    [&] {
      return finished(first.run_id) && finished(second.run_id);
    },
    30s));
  EXPECT_EQ(run_state(first.run_id), "cancelled");
  EXPECT_EQ(run_state(second.run_id), "ok");
  calls = fake_.calls();
  ASSERT_EQ(calls.size(), 2u);
  auto seen = messages_of(calls[1]);
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_NE(seen[1].second.find("\"no, a haiku\""), std::string::npos);
  EXPECT_EQ(seen[1].second.find("long essay"), std::string::npos)
    << "the new run starts from the new input";
  EXPECT_EQ(reply_of(second.run_id), fixture_answer(GetParam()));
}

TEST_P(ModelHttp, CancelAbortsTheStreamWithinASecond) {
  start();
  auto run = turn("t-cancel", "c1", "take your time");
  ASSERT_EQ(run.status, 200) << run.body;
  ASSERT_TRUE(streaming(0));
  auto cancel = http_->post("/v1/runs/" + run.run_id + "/cancel", "");
  auto answered = clock::now();
  ASSERT_EQ(cancel.status, 200) << cancel.body;
  ASSERT_TRUE(eventually(
    [&] {
      auto calls = fake_.calls();
      return !calls.empty() && calls[0].ended;
    },
    1s))
    << "the stream was not closed within 1 s of the cancel's answer";
  auto calls = fake_.calls();
  EXPECT_TRUE(calls[0].client_closed);
  EXPECT_LT(calls[0].ended_at - answered, 1s);
  EXPECT_LT(calls[0].events_sent, 10u) << "closed mid-answer";
  ASSERT_TRUE(eventually(
    [&] {
      return finished(run.run_id);
    },
    10s));
  EXPECT_EQ(run_state(run.run_id), "cancelled");
  EXPECT_EQ(fake_.call_count(), 1u) << "a cancelled call is not retried";
}

TEST_P(ModelHttp, RetryAfterOfA429IsHonouredAndA500IsRetried) {
  fake_model_reply limited;
  limited.kind = fake_model_reply::status;
  limited.code = 429;
  limited.headers = "Retry-After: 1\r\n";
  limited.body = R"({"error":{"type":"rate_limit_error","message":"slow"}})";
  fake_.push(limited);
  fake_model_reply broken;
  broken.kind = fake_model_reply::status;
  broken.code = 500;
  broken.body = R"({"error":{"type":"api_error","message":"oops"}})";
  fake_.push(broken);
  start(false);
  auto run = turn("t-429", "r1", "hello");
  ASSERT_EQ(run.status, 200) << run.body;
  ASSERT_TRUE(eventually(
    [&] {
      return finished(run.run_id);
    },
    30s));
  EXPECT_EQ(run_state(run.run_id), "ok");
  EXPECT_EQ(reply_of(run.run_id), fixture_answer(GetParam()));
  auto calls = fake_.calls();
  ASSERT_EQ(calls.size(), 3u);
  EXPECT_EQ(calls[1].body, calls[0].body) << "the same call again";
  EXPECT_GE(calls[1].received - calls[0].ended_at, 1s)
    << "retry-after: 1 was honoured (the backoff alone is 50 ms)";
  EXPECT_LT(calls[2].received - calls[1].ended_at, 1s)
    << "a 500 without retry-after waits the backoff only";
}

TEST_P(ModelHttp, ACutStreamIsRetriedAsAWholeCall) {
  fake_model_reply cut;
  cut.kind = fake_model_reply::cut;
  cut.cut_after_events = 4;
  fake_.push(cut);
  start(false);
  auto run = turn("t-cut", "k1", "hello");
  ASSERT_EQ(run.status, 200) << run.body;
  ASSERT_TRUE(eventually(
    [&] {
      return finished(run.run_id);
    },
    30s));
  EXPECT_EQ(run_state(run.run_id), "ok");
  auto calls = fake_.calls();
  ASSERT_EQ(calls.size(), 2u);
  EXPECT_EQ(calls[0].events_sent, 4u);
  EXPECT_FALSE(calls[0].client_closed) << "the server cut it";
  EXPECT_EQ(calls[1].body, calls[0].body);
  EXPECT_EQ(reply_of(run.run_id), fixture_answer(GetParam()))
    << "the answer is the retried call's, whole, not the cut prefix twice";
}

TEST_P(ModelHttp, AnotherClientErrorFailsAtOnceWithItsMessage) {
  fake_model_reply denied;
  denied.kind = fake_model_reply::status;
  denied.code = 401;
  denied.body = R"({"error":{"type":"authentication_error",)"
                R"("message":"invalid x-api-key"}})";
  fake_.push(denied);
  start(false);
  auto run = turn("t-401", "d1", "hello");
  ASSERT_EQ(run.status, 200) << run.body;
  ASSERT_TRUE(eventually(
    [&] {
      return finished(run.run_id);
    },
    30s));
  EXPECT_EQ(run_state(run.run_id), "error");
  auto reply = reply_of(run.run_id);
  EXPECT_NE(reply.find("answered 401"), std::string::npos) << reply;
  EXPECT_NE(reply.find("authentication_error: invalid x-api-key"),
            std::string::npos)
    << reply;
  EXPECT_EQ(fake_.call_count(), 1u) << "no retry";
  EXPECT_EQ(node_->log().find("sk-test-key"), std::string::npos)
    << "the key is never logged";
}

TEST_P(ModelHttp, ToolCallsRunThroughTheToolServerAndTheirResultsGoBack) {
  fake_.push_tool_round(GetParam());
  start(false);
  auto run = turn("t-tools", "u1", "remember that I take aspirin");
  ASSERT_EQ(run.status, 200) << run.body;
  ASSERT_TRUE(eventually(
    [&] {
      return finished(run.run_id);
    },
    30s));
  EXPECT_EQ(run_state(run.run_id), "ok") << reply_of(run.run_id);
  EXPECT_EQ(reply_of(run.run_id), fixture_answer(GetParam()))
    << "the answer is the call's after the tools";
  auto calls = fake_.calls();
  ASSERT_EQ(calls.size(), 2u) << "one call for the tools, one after them";
  // Both calls declared the node's tools.
  for (auto& c : calls) {
    EXPECT_NE(std::find(c.tools.begin(), c.tools.end(), "state_put"),
              c.tools.end());
    EXPECT_NE(std::find(c.tools.begin(), c.tools.end(), "notify"),
              c.tools.end());
  }
  EXPECT_TRUE(calls[0].tool_results.empty());
  // The second call carried the assistant's calls and their results, in
  // the provider's shape (fake_model_server's read_tool_traffic).
  auto& second = calls[1];
  std::vector<std::string>
    ids = GetParam() == "openai"
            ? std::vector<std::string>{"call_k3Jb6ZzD1Yc0m2NnVt0aQpLs",
                                       "call_Rw8uE4f0sPp9HhXx2LqGm7Td"}
            : std::vector<std::string>{"toolu_01A09q90qw90lq917835lq9",
                                       "toolu_01B7yN3kFqz2sE4cXw8pQm5R"};
  EXPECT_EQ(second.tool_call_ids, ids);
  ASSERT_EQ(second.tool_results.size(), 2u) << second.body;
  EXPECT_EQ(second.tool_results[0].call_id, ids[0]);
  EXPECT_EQ(second.tool_results[1].call_id, ids[1]);
  for (auto& r : second.tool_results) {
    EXPECT_FALSE(r.is_error) << r.content;
    rapidjson::Document doc;
    EXPECT_FALSE(json::parse(r.content, doc)) << "an ok result is its JSON";
    EXPECT_EQ(r.content.find("Error"), std::string::npos) << r.content;
  }
  EXPECT_NE(second.tool_results[1].content.find("delivered"), std::string::npos)
    << second.tool_results[1].content;
  auto conv = messages_of(second);
  if (GetParam() == "openai") {
    // system, user, assistant with tool_calls, tool, tool
    ASSERT_EQ(conv.size(), 5u) << second.body;
    EXPECT_EQ(conv[2].first, "assistant");
    EXPECT_EQ(conv[3].first, "tool");
    EXPECT_EQ(conv[4].first, "tool");
  } else {
    // system, user, assistant's text and tool_use blocks, user's
    // tool_result blocks
    ASSERT_EQ(conv.size(), 4u) << second.body;
    EXPECT_EQ(conv[2].first, "assistant");
    EXPECT_NE(conv[2].second.find(R"("type":"tool_use")"), std::string::npos);
    EXPECT_NE(conv[2].second.find("I'll note that."), std::string::npos);
    EXPECT_EQ(conv[3].first, "user");
    EXPECT_NE(conv[3].second.find(R"("type":"tool_result")"),
              std::string::npos);
  }
  // state_put stored the value in the butler's store.
  pqxx::connection conn{url_};
  pqxx::nontransaction tx{conn};
  auto row = tx.exec("SELECT value::text FROM butler_state WHERE butler = "
                     "'general' AND scope = '' AND key = 'meds'");
  ASSERT_EQ(row.size(), 1u);
  EXPECT_EQ(row[0][0].as<std::string>(), R"(["aspirin"])");
  // notify reached the asker through the outbox before the run's answer:
  // the outbox held it when the second call began (the tool server
  // answered "delivered" once the line was written), so before the run
  // finished and its reply entered the transcript. A thread's reply goes
  // to the transcript, not to the outbox.
  auto outbox = read_file(dir_ + "/outbox.jsonl");
  EXPECT_NE(outbox.find(R"("message":"noted")"), std::string::npos) << outbox;
  EXPECT_NE(outbox.find(R"("intent":"reply")"), std::string::npos) << outbox;
  EXPECT_EQ(outbox.find(fixture_answer(GetParam()).substr(0, 20)),
            std::string::npos)
    << "only the tool's message went through the outbox";
}

TEST_P(ModelHttp, ToolCallsPastMaxModelCallsEndTheRunWithAnError) {
  fake_.push_tool_round(GetParam());
  start(false, "max_model_calls = 1\n");
  auto run = turn("t-limit", "l1", "remember that I take aspirin");
  ASSERT_EQ(run.status, 200) << run.body;
  ASSERT_TRUE(eventually(
    [&] {
      return finished(run.run_id);
    },
    30s));
  EXPECT_EQ(run_state(run.run_id), "error");
  auto reply = reply_of(run.run_id);
  EXPECT_NE(reply.find("max_model_calls = 1"), std::string::npos) << reply;
  EXPECT_EQ(fake_.call_count(), 1u);
  pqxx::connection conn{url_};
  pqxx::nontransaction tx{conn};
  EXPECT_EQ(tx.exec("SELECT 1 FROM butler_state WHERE key = 'meds'").size(), 0u)
    << "the pending calls are not made";
}

/// The `model` field of a call's body.
std::string model_of(const fake_model_call& call) {
  rapidjson::Document doc;
  if (json::parse(call.body, doc) || !doc.IsObject() || !doc.HasMember("model")
      || !doc["model"].IsString())
    return {};
  return doc["model"].GetString();
}

TEST_P(ModelHttp, ATurnChoosesItsRunsModelAndMaxSteps) {
  start(false);
  auto post = [&](const std::string& id, const std::string& extra) {
    auto r = http_->post("/v1/threads/t-opts/turns",
                         R"({"message_id":")" + id
                           + R"(","text":"remember that I take aspirin")"
                           + extra + "}");
    EXPECT_EQ(r.status, 200) << r.body;
    rapidjson::Document doc;
    json::parse(r.body, doc);
    auto run_id = doc.IsObject() && doc.HasMember("run_id")
                    ? std::string{doc["run_id"].GetString()}
                    : std::string{};
    EXPECT_TRUE(eventually(
      [&] {
        return finished(run_id);
      },
      30s))
      << id;
    return run_id;
  };
  // A chosen model is the one the run's call names; the next turn, without
  // one, gets the butler's.
  auto chosen = post("o1", R"(,"model":"chosen-model-7")");
  EXPECT_EQ(run_state(chosen), "ok") << reply_of(chosen);
  auto plain = post("o2", "");
  EXPECT_EQ(run_state(plain), "ok");
  auto calls = fake_.calls();
  ASSERT_EQ(calls.size(), 2u);
  EXPECT_EQ(model_of(calls[0]), "chosen-model-7");
  EXPECT_EQ(model_of(calls[1]), "test-model");

  // max_steps bounds the run's model calls: a model that asks for tools
  // twice is stopped after the 2 calls its turn allows (the butler allows
  // 16), and the message says which limit it reached.
  fake_.push_tool_round(GetParam());
  fake_.push_tool_round(GetParam());
  auto bounded = post("o3", R"(,"options":{"max_steps":2})");
  EXPECT_EQ(run_state(bounded), "error");
  auto reply = reply_of(bounded);
  EXPECT_NE(reply.find("options.max_steps of the turn = 2"), std::string::npos)
    << reply;
  EXPECT_EQ(fake_.call_count(), 4u) << "two calls, no third";
  // With room for three, the same model gets its answer after two rounds.
  fake_.push_tool_round(GetParam());
  fake_.push_tool_round(GetParam());
  auto roomy = post("o4", R"(,"model":"m2","options":{"max_steps":3})");
  EXPECT_EQ(run_state(roomy), "ok") << reply_of(roomy);
  calls = fake_.calls();
  ASSERT_EQ(calls.size(), 7u);
  for (size_t i = 4; i < 7; ++i)
    EXPECT_EQ(model_of(calls[i]), "m2") << i;

  // Refused before anything is stored, naming the field.
  for (auto [extra, field] :
       {std::pair<std::string, std::string>{R"(,"model":"a b")", "'model'"},
        {R"(,"options":{"max_steps":0})", "'options.max_steps'"},
        {R"(,"options":{"max_steps":5000})", "'options.max_steps'"},
        {R"(,"options":{"steps":2})", "'options.steps'"}}) {
    auto r = http_->post("/v1/threads/t-opts/turns",
                         R"({"message_id":"bad","text":"x")" + extra + "}");
    EXPECT_EQ(r.status, 400) << extra;
    EXPECT_NE(r.body.find(field), std::string::npos) << r.body;
  }
  EXPECT_EQ(query("SELECT count(*)::text FROM thread_transcript WHERE "
                  "thread_id = $1 AND message_id = 'bad'",
                  "t-opts"),
            "0");
}

INSTANTIATE_TEST_SUITE_P(Kinds, ModelHttp,
                         ::testing::Values("openai", "anthropic"),
                         [](const auto& info) {
                           return info.param;
                         });

} // namespace
} // namespace butlers::test
