#pragma once

// A node_fixture for the conversation thread API: starts a node whose
// `general` butler runs scripted turns, sends turns over HTTP and reads
// their answers, and looks at the thread tables and /metrics. Header-only;
// threads_pgtest.cpp and thread_list_pgtest.cpp share it.

#include <chrono>
#include <cstdint>
#include <string>

#include <pqxx/pqxx>

#include "runtime/json.hpp"
#include "test/support/http_client.hpp"
#include "test/support/node_fixture.hpp"

namespace butlers::test {

/// System clock now, Unix µs.
inline int64_t unix_us_now() {
  using namespace std::chrono;
  return duration_cast<microseconds>(system_clock::now().time_since_epoch())
    .count();
}

/// Member `key` of `v` when it is a string, else "".
inline std::string str(const rapidjson::Value& v, const char* key) {
  auto i = v.FindMember(key);
  return i != v.MemberEnd() && i->value.IsString() ? i->value.GetString()
                                                   : std::string{};
}

/// A turn's answer.
struct turn_answer {
  int status = 0;
  std::string run_id;
  std::string kind;
  bool duplicate = false;
  std::string code;
  std::string body;
  /// System clock when the answer was read, Unix µs.
  int64_t answered_us = 0;
};

class thread_node : public node_fixture {
 protected:
  /// Starts a node: `general` runs scripted turns of `turn_ms`.
  void start(uint32_t turn_ms, uint32_t turns, uint32_t sessions,
             const std::string& extra = {}) {
    use_database("threads");
    use_files("threads");
    launch("[[butler]]\nname = \"general\"\nmax_concurrent_sessions = "
           + std::to_string(sessions) + "\nmax_pending = 1000\n"
           + "[butler.runtime]\nturn_ms = " + std::to_string(turn_ms)
           + "\nturns = " + std::to_string(turns) + "\n" + extra);
  }

  /// Starts a node on `url_` with `config_tail` (butlers) and waits until
  /// it is ready.
  void launch(const std::string& config_tail) {
    ASSERT_TRUE(start_node(
      node_head("threads-test", 5, "request_timeout_ms = 10000\n") + config_tail
      + "[[messenger.adapter]]\nkind = \"outbox\"\npath = \"" + dir_
      + "/outbox.jsonl\"\n"));
  }

  turn_answer turn(const std::string& thread, const std::string& body) {
    auto r = http_->post("/v1/threads/" + thread + "/turns", body);
    turn_answer a;
    a.answered_us = unix_us_now();
    a.status = r.status;
    a.body = r.body;
    rapidjson::Document doc;
    if (json::parse(r.body, doc) || !doc.IsObject())
      return a;
    a.run_id = str(doc, "run_id");
    a.kind = str(doc, "kind");
    if (doc.HasMember("duplicate") && doc["duplicate"].IsBool())
      a.duplicate = doc["duplicate"].GetBool();
    if (doc.HasMember("error") && doc["error"].IsObject())
      a.code = str(doc["error"], "code");
    return a;
  }

  turn_answer turn(const std::string& thread, const std::string& message_id,
                   const std::string& text, const std::string& more = {}) {
    return turn(thread, R"({"message_id":")" + message_id + R"(","text":")"
                          + text + "\"" + more + "}");
  }

  int64_t scalar(const std::string& sql) {
    pqxx::connection conn{url_};
    pqxx::nontransaction tx{conn};
    auto r = tx.exec1(sql);
    return r[0].is_null() ? 0 : r[0].as<int64_t>();
  }

  std::string run_state(const std::string& run_id) {
    pqxx::connection conn{url_};
    pqxx::nontransaction tx{conn};
    auto r = tx.exec_params("SELECT state FROM thread_runs WHERE run_id = $1",
                            run_id);
    return r.empty() ? std::string{} : r[0][0].as<std::string>();
  }

  bool finished(const std::string& run_id) {
    auto s = run_state(run_id);
    return s == "ok" || s == "error" || s == "cancelled";
  }

  /// A counter or gauge from /metrics.
  int64_t metric(const std::string& name) {
    auto body = http_->get("/metrics").body;
    auto pos = body.find("\n" + name + " ");
    if (pos == std::string::npos)
      return -1;
    return std::stoll(body.substr(pos + name.size() + 2));
  }
};

} // namespace butlers::test
