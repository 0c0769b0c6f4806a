#include <mutex>

#include <gtest/gtest.h>

#include "runtime/client/worker.hpp"

namespace butlers::client {
namespace {

using namespace std::chrono_literals;

/// A node in memory: answers recv with nothing, records every other call.
class recording_transport final : public transport {
 public:
  response perform(const request& req, const std::atomic<bool>&) override {
    std::lock_guard<std::mutex> guard{mtx};
    calls.push_back(req);
    response r;
    r.status = 200;
    r.body = req.path.find("/recv") != std::string::npos ? R"({"items":[]})"
                                                         : "{}";
    return r;
  }

  std::mutex mtx;
  std::vector<request> calls;
};

work_delivery delivery() {
  work_delivery d;
  d.work_id = "w1";
  d.lease_token = "tok";
  d.envelope
    = R"({"request_context":{"request_id":"r1"},"input":{"prompt":"p"}})";
  d.request_id = "r1";
  d.attempt = 1;
  return d;
}

TEST(ClientWorker, ParsesARecvAnswer) {
  std::string error;
  auto got = parse_deliveries(
    R"({"items":[{"work_id":"w","lease_token":"t","attempt":2,)"
    R"("envelope":{"request_context":{"request_id":"r"}},"steer_inputs":[]}]})",
    &error);
  ASSERT_TRUE(got) << error;
  ASSERT_EQ(got->size(), 1u);
  EXPECT_EQ((*got)[0].work_id, "w");
  EXPECT_EQ((*got)[0].lease_token, "t");
  EXPECT_EQ((*got)[0].attempt, 2u);
  EXPECT_EQ((*got)[0].request_id, "r");
  EXPECT_EQ((*got)[0].envelope, R"({"request_context":{"request_id":"r"}})");
  EXPECT_FALSE(parse_deliveries("[]", &error));
  EXPECT_NE(error.find("not a recv answer"), std::string::npos);
}

TEST(ClientWorker, StdoutBecomesTheReplyOrTheResponse) {
  auto d = delivery();
  EXPECT_EQ(ack_body(d, "hello\n", 5),
            R"({"lease_token":"tok","response":{"schema_version":)"
            R"("route_response.v1","request_context":{"request_id":"r1"},)"
            R"("status":"ok","result":{"reply":"hello"},"timing":)"
            R"({"duration_ms":5.000000}}})");
  EXPECT_NE(ack_body(d, "", 1).find(R"("result":{})"), std::string::npos);
  auto own = R"({"schema_version":"route_response.v1","status":"error"})";
  EXPECT_EQ(ack_body(d, own, 1),
            std::string{R"({"lease_token":"tok","response":)"} + own + "}");
}

TEST(ClientWorker, AcksOnExit0AndNacksOtherwise) {
  auto t = std::make_shared<recording_transport>();
  worker_options o;
  o.butler = "py";
  o.argv = {"/bin/sh", "-c", "cat >/dev/null; echo done $BUTLERS_WORK_ID"};
  o.visibility = 300ms;
  worker w{t, o};
  w.process(delivery());
  ASSERT_EQ(t->calls.size(), 1u);
  EXPECT_EQ(t->calls[0].path, "/v1/butlers/py/work/w1/ack");
  EXPECT_NE(t->calls[0].body.find(R"("reply":"done w1")"), std::string::npos)
    << t->calls[0].body;
  EXPECT_EQ(w.counts().acked, 1u);

  auto t2 = std::make_shared<recording_transport>();
  o.argv = {"/bin/sh", "-c", "sleep 0.5; echo broken >&2; exit 3"};
  worker failing{t2, o};
  failing.process(delivery());
  ASSERT_GE(t2->calls.size(), 2u) << "extended while the command ran";
  EXPECT_EQ(t2->calls.front().path, "/v1/butlers/py/work/w1/extend");
  EXPECT_EQ(t2->calls.back().path, "/v1/butlers/py/work/w1/nack");
  EXPECT_NE(t2->calls.back().body.find("broken"), std::string::npos)
    << t2->calls.back().body;
  EXPECT_EQ(failing.counts().nacked, 1u);
}

} // namespace
} // namespace butlers::client
