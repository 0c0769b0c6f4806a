#include <sstream>
#include <string>

#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include "runtime/json.hpp"
#include "runtime/log.hpp"
#include "runtime/request_log.hpp"
#include "runtime/route.hpp"
#include "runtime/tracing.hpp"

namespace {

using butlers::log_fields;

/// Routes the default logger into a string for one test, with the node's
/// formatter, and restores the previous logger afterwards.
class captured_log {
 public:
  captured_log() : previous_(spdlog::default_logger()) {
    auto sink = std::make_shared<spdlog::sinks::ostream_sink_st>(out_);
    auto logger = std::make_shared<spdlog::logger>("log_test", sink);
    logger->set_formatter(butlers::make_log_formatter("node-a"));
    logger->set_level(spdlog::level::info);
    spdlog::set_default_logger(logger);
  }
  ~captured_log() {
    spdlog::set_default_logger(previous_);
  }
  captured_log(const captured_log&) = delete;
  captured_log& operator=(const captured_log&) = delete;

  std::string text() const {
    return out_.str();
  }

 private:
  std::ostringstream out_;
  std::shared_ptr<spdlog::logger> previous_;
};

rapidjson::Document parse_line(const std::string& line) {
  rapidjson::Document doc;
  auto err = butlers::json::parse(line, doc);
  EXPECT_FALSE(err) << (err ? err->message : "") << " in " << line;
  return doc;
}

} // namespace

TEST(log_fields, renders_members_and_leaves_out_empty_values) {
  log_fields f;
  f.add("request_id", "r-1")
    .add("destination_butler", "")
    .add_int("attempt", 2)
    .add_ms("queue_wait_ms", -1)
    .add_ms("total_ms", 12);
  EXPECT_EQ(f.members(), R"("request_id":"r-1","attempt":2,"total_ms":12)");
  EXPECT_EQ(log_fields{}.members(), "");
}

TEST(log_fields, escapes_keys_and_values) {
  log_fields f;
  f.add("msg\"", "a\"b\n}");
  EXPECT_EQ(f.members(), R"("msg\"":"a\"b\n}")");
}

TEST(log_with, puts_fields_beside_msg_in_the_json_line) {
  std::string text;
  {
    captured_log log;
    log_fields f;
    f.add("request_id", "r-1")
      .add("lifecycle_state", "errored")
      .add("error_class", "timeout")
      .add_ms("total_ms", 40);
    butlers::log_with(spdlog::level::warn, f, "request {}: {}", "r-1",
                      "errored \"x\"");
    spdlog::info("plain line");
    text = log.text();
  }
  auto nl = text.find('\n');
  ASSERT_NE(nl, std::string::npos) << text;
  auto first = parse_line(text.substr(0, nl));
  ASSERT_TRUE(first.IsObject());
  EXPECT_STREQ(first["level"].GetString(), "warning");
  EXPECT_STREQ(first["node"].GetString(), "node-a");
  EXPECT_STREQ(first["msg"].GetString(), "request r-1: errored \"x\"");
  EXPECT_STREQ(first["request_id"].GetString(), "r-1");
  EXPECT_STREQ(first["lifecycle_state"].GetString(), "errored");
  EXPECT_STREQ(first["error_class"].GetString(), "timeout");
  EXPECT_EQ(first["total_ms"].GetInt64(), 40);
  // The fields belong to that one line only.
  auto second = parse_line(
    text.substr(nl + 1, text.find('\n', nl + 1) - nl - 1));
  ASSERT_TRUE(second.IsObject());
  EXPECT_STREQ(second["msg"].GetString(), "plain line");
  EXPECT_FALSE(second.HasMember("request_id"));
}

TEST(log_with, skips_formatting_below_the_level) {
  std::string text;
  {
    captured_log log;
    log_fields f;
    f.add("request_id", "r-2");
    butlers::log_with(spdlog::level::debug, f, "hidden {}", 1);
    text = log.text();
  }
  EXPECT_EQ(text, "");
}

TEST(request_log, trace_id_is_the_one_the_request_trace_has) {
  const std::string id = "0193a3c2-7b1e-7cc0-9d2a-3f2b8c1d4e5f";
  const std::string tp = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-"
                         "01";
  // With an envelope traceparent: its trace id.
  EXPECT_EQ(butlers::request_trace_id_hex(id, tp),
            "0af7651916cd43dd8448eb211c80319c");
  EXPECT_EQ(butlers::request_trace_id_hex(id, tp),
            butlers::to_hex(
              butlers::request_trace_for(id, tp, 1.0).root.trace));
  // Without one (or an invalid one): the one derived from the request id,
  // as the switchboard's trace has it.
  auto derived = butlers::to_hex(
    butlers::request_trace_for(id, "", 1.0).root.trace);
  EXPECT_EQ(butlers::request_trace_id_hex(id, ""), derived);
  EXPECT_EQ(butlers::request_trace_id_hex(id, "not-a-traceparent"), derived);
  EXPECT_EQ(derived.size(), 32u);
}

TEST(request_log, request_fields_name_request_source_and_trace) {
  butlers::request_context ctx;
  ctx.request_id = "r-1";
  ctx.source_channel = "telegram";
  ctx.trace_parent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
  EXPECT_EQ(butlers::request_log_fields(ctx).members(),
            R"("request_id":"r-1","source":"telegram",)"
            R"("trace_id":"0af7651916cd43dd8448eb211c80319c")");
  butlers::route_envelope env;
  env.request_id = "r-1";
  env.source_channel = "api";
  env.butler = "health";
  env.trace_parent = ctx.trace_parent;
  EXPECT_EQ(butlers::route_log_fields(env).members(),
            R"("request_id":"r-1","source":"api","destination_butler":)"
            R"("health","trace_id":"0af7651916cd43dd8448eb211c80319c")");
}
