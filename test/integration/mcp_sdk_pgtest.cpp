// MCP conformance against the official TypeScript SDK: its client
// (npm @modelcontextprotocol/sdk, pinned by test/mcp/package-lock.json and
// installed into the build tree by test/mcp/install.sh; test-only) is the
// command of a butler session. A message ingested over the API routes to
// that butler; the session's script (test/mcp/sdk_client.mjs) connects to
// the node's /mcp with its BUTLERS_MCP_URL and BUTLERS_MCP_TOKEN over
// Streamable HTTP, negotiating one protocol version (2025-11-25, the SDK's
// own, or 2025-06-18, offered by rewriting initialize), lists the tools,
// pings, calls all eleven tools (the SDK validating each CallToolResult and
// its structuredContent against the tool's outputSchema) and a few that
// must fail, ends the MCP session with DELETE, and writes what it saw to a
// JSON summary. The test then checks the summary and what the calls did
// on the node's side: the outbox, butler_state, butler_reminders,
// route_work and tool_calls.

#include <sys/wait.h>

#include <chrono>
#include <cstdio>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>
#include <pqxx/pqxx>

#include "runtime/json.hpp"
#include "test/support/node_fixture.hpp"
#include "test/support/poll.hpp"

namespace butlers::test {
namespace {

using namespace std::chrono_literals;

/// Where test/mcp/install.sh puts the SDK and the client script.
const std::string sdk_dir = BUTLERS_MCP_SDK_DIR;

const std::vector<std::string> all_tools{"notify",         "state_get",
                                         "state_put",      "state_list",
                                         "state_delete",   "remind",
                                         "remind_cancel",  "remind_list",
                                         "route_to",       "recall",
                                         "approval_prompt"};

/// Runs test/mcp/install.sh into `sdk_dir`: "" when the SDK is there, else
/// the script's output and exit status.
std::string install_sdk() {
  auto command = std::string{"'"} + BUTLERS_SOURCE_DIR
                 + "/test/mcp/install.sh' '" + sdk_dir + "' 2>&1";
  FILE* out = ::popen(command.c_str(), "r");
  if (out == nullptr)
    return "cannot run " + command;
  std::string text;
  char buf[4096];
  size_t n = 0;
  while ((n = std::fread(buf, 1, sizeof(buf), out)) > 0)
    text.append(buf, n);
  int status = ::pclose(out);
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
    return {};
  return text + "(" + command + ": exit status " + std::to_string(status) + ")";
}

/// The SDK version test/mcp/package.json pins.
std::string pinned_version() {
  rapidjson::Document d;
  auto text = read_file(std::string{BUTLERS_SOURCE_DIR}
                        + "/test/mcp/package.json");
  if (json::parse(text, d) || !d.IsObject())
    return "(unreadable test/mcp/package.json)";
  return d["dependencies"]["@modelcontextprotocol/sdk"].GetString();
}

std::string str(const rapidjson::Value& v, const char* name) {
  auto i = v.FindMember(name);
  return i != v.MemberEnd() && i->value.IsString() ? i->value.GetString()
                                                   : std::string{};
}

class McpSdk : public node_fixture {
 protected:
  static void SetUpTestSuite() {
    install_error_ = install_sdk();
  }

  void SetUp() override {
    ASSERT_EQ(install_error_, "")
      << "test/mcp/install.sh could not install the MCP TypeScript SDK "
         "(Node.js, npm and the npm registry or a warm ~/.npm are needed):\n"
      << install_error_;
    use_database("mcp_sdk");
    use_files("mcp_sdk");
  }

  std::string summary_path() const {
    return dir_ + "/summary.json";
  }

  /// The node: butler `sdk` (keyword "conformance") runs the SDK client
  /// offering `version`; butler `peer` (scripted) takes its route_to; the
  /// replies go to an outbox. One attempt per segment, so a failed run
  /// ends the request instead of running the client again.
  std::string config(const std::string& version) const {
    std::string command = R"(["env", )"
                          + json::quote("MCP_SDK_PROTOCOL=" + version) + ", "
                          + json::quote("MCP_SDK_SUMMARY=" + summary_path())
                          + R"(, "MCP_SDK_PEER=peer", "node", )"
                          + json::quote(sdk_dir + "/sdk_client.mjs") + "]";
    return node_head("mcp-sdk-test", 5)
           + "[[policy]]\ntier = \"default\"\nretry_max_attempts = 1\n"
             "[[butler]]\nname = \"sdk\"\nkeywords = [\"conformance\"]\n"
             "session_timeout_s = 60\n"
             "[butler.runtime]\nkind = \"cli\"\nfamily = \"opencode\"\n"
             "kill_grace_ms = 300\ncommand = "
           + command
           + "\n[[butler]]\nname = \"peer\"\n[butler.runtime]\nturn_ms = 0\n"
             "[[messenger.adapter]]\nkind = \"outbox\"\npath = \""
           + dir_ + "/outbox.jsonl\"\n";
  }

  /// Ingests the message that routes to `sdk`; its request id.
  std::string ingest(const std::string& version) {
    auto body = R"({"schema_version":"ingest.v1","source":{"channel":"api",)"
                R"("provider":"internal","endpoint_identity":"tests"},"event":)"
                R"({"external_event_id":"sdk-)"
                + version
                + R"(","observed_at":"2026-11-28T20:00:00Z"},)"
                  R"("sender":{"identity":"user-1"},"payload":{"raw":{},)"
                  R"("normalized_text":"run the MCP SDK conformance"}})";
    auto r = http_->post("/v1/ingest", body);
    EXPECT_EQ(r.status, 202) << r.body;
    rapidjson::Document d;
    if (json::parse(r.body, d) || !d.IsObject())
      return {};
    return str(d, "request_id");
  }

  std::string query1(const std::string& sql, const std::string& arg) {
    pqxx::connection conn{url_};
    pqxx::nontransaction tx{conn};
    auto rows = tx.exec_params(sql, arg);
    return rows.empty() || rows[0][0].is_null() ? std::string{"(none)"}
                                                : rows[0][0].as<std::string>();
  }

  std::string lifecycle(const std::string& request) {
    return query1("SELECT lifecycle_state FROM message_inbox WHERE "
                  "request_id = $1",
                  request);
  }

  /// Ingests, waits for the client's summary (or the request's end), and
  /// parses it into `summary`; the request id.
  std::string run(const std::string& version, rapidjson::Document& summary) {
    auto request = ingest(version);
    EXPECT_FALSE(request.empty());
    bool ended = eventually(
      [&] {
        auto state = lifecycle(request);
        return !read_file(summary_path()).empty() || state == "parsed"
               || state == "errored";
      },
      60s);
    EXPECT_TRUE(ended) << "no summary from the SDK client and the request "
                       << request << " is " << lifecycle(request) << "\n"
                       << node_->log();
    auto text = read_file(summary_path());
    EXPECT_FALSE(json::parse(text, summary)) << text << node_->log();
    return request;
  }

  void expect_summary(const rapidjson::Document& s, const std::string& version,
                      const std::string& text);
  void expect_exchanges(const rapidjson::Document& s,
                        const std::string& version);
  void expect_effects(const rapidjson::Document& s, const std::string& version,
                      const std::string& request);
  void conformance(const std::string& version);

  static inline std::string install_error_;
};

/// What the client reports: every check held, with the pinned SDK, the
/// version offered, the catalogue, and each call's structured result.
void McpSdk::expect_summary(const rapidjson::Document& s,
                            const std::string& version,
                            const std::string& text) {
  ASSERT_TRUE(s.IsObject() && s.HasMember("ok")) << text;
  if (!s["ok"].GetBool()) {
    std::string failed;
    for (auto* list : {"failures", "transport_errors", "client_errors"})
      for (auto& f : s[list].GetArray())
        failed += std::string{"  "} + f.GetString() + "\n";
    FAIL() << "the SDK client failed:\n"
           << failed << "its summary:\n"
           << text << "\nthe node's log:\n"
           << node_->log();
  }
  EXPECT_EQ(str(s, "sdk_version"), pinned_version());
  EXPECT_EQ(str(s, "offered"), version);
  EXPECT_EQ(str(s, "negotiated"), version);
  EXPECT_EQ(str(s["server"], "name"), "butlers");
  std::vector<std::string> tools;
  for (auto& t : s["tools"].GetArray())
    tools.emplace_back(t.GetString());
  EXPECT_EQ(tools, all_tools);
  auto& calls = s["calls"];
  for (auto& tool : all_tools)
    EXPECT_TRUE(calls.HasMember(tool.c_str()) && calls[tool.c_str()].IsObject())
      << tool << " was not called, or not answered ok:\n"
      << text;
  EXPECT_EQ(str(calls["notify"], "status"), "delivered") << text;
  EXPECT_TRUE(calls["state_get"]["found"].GetBool());
  EXPECT_FALSE(calls["state_get_deleted"]["found"].GetBool());
  EXPECT_TRUE(calls["remind_cancel"]["cancelled"].GetBool());
  EXPECT_EQ(str(calls["approval_prompt"], "behavior"), "deny") << text;
  EXPECT_TRUE(calls["bad_arguments"]["isError"].GetBool());
  EXPECT_EQ(calls["unknown_tool"]["code"].GetInt(), -32602);
}

/// The HTTP exchanges the client recorded: initialize without session or
/// version headers, every later one of the session with both; 202 to
/// notifications, 405 to the GET for a server stream, 204 to the DELETE,
/// and an event stream for the call that asked for progress.
void McpSdk::expect_exchanges(const rapidjson::Document& s,
                              const std::string& version) {
  auto& http = s["http"];
  ASSERT_GT(http.Size(), 15u);
  EXPECT_EQ(str(http[0], "rpc"), "initialize");
  EXPECT_EQ(http[0]["status"].GetInt(), 200);
  EXPECT_TRUE(http[0]["protocol_header"].IsNull());
  std::map<std::string, int> statuses;
  int event_streams = 0;
  bool ended = false;
  for (rapidjson::SizeType i = 1; i < http.Size(); ++i) {
    auto& x = http[i];
    auto what = str(x, "method") + " " + str(x, "rpc");
    if (ended) // the probe of the ended session: 404
      EXPECT_EQ(x["status"].GetInt(), 404) << what;
    else
      EXPECT_EQ(str(x, "protocol_header"), version) << what;
    EXPECT_TRUE(x["session_header"].GetBool()) << what;
    if (str(x, "method") == "DELETE") {
      EXPECT_EQ(x["status"].GetInt(), 204);
      ended = true;
    }
    if (str(x, "content_type").rfind("text/event-stream", 0) == 0)
      ++event_streams;
    statuses[str(x, "method")] = x["status"].GetInt();
  }
  EXPECT_TRUE(ended);
  EXPECT_EQ(statuses["GET"], 405);
  EXPECT_EQ(event_streams, 1);
}

/// What the calls did on the node: the notify and the answer in the
/// outbox, the kept state and the deleted one, the cancelled reminder,
/// the peer's work item of the route_to, and every call recorded.
void McpSdk::expect_effects(const rapidjson::Document& s,
                            const std::string& version,
                            const std::string& request) {
  auto& calls = s["calls"];
  auto outbox = read_file(dir_ + "/outbox.jsonl");
  EXPECT_NE(outbox.find("sdk " + version + " notify"), std::string::npos)
    << outbox;
  EXPECT_NE(outbox.find("conformance passed with protocol " + version),
            std::string::npos)
    << outbox;
  EXPECT_EQ(query1("SELECT value::text || ' v' || version FROM butler_state "
                   "WHERE butler = 'sdk' AND scope = '' AND key = $1",
                   "kept:" + version),
            "\"stays\" v1");
  EXPECT_EQ(query1("SELECT count(*) FROM butler_state WHERE key = $1",
                   "sdk:" + version),
            "0");
  auto reminder = str(calls["remind"], "reminder_id");
  EXPECT_EQ(query1("SELECT state || ' ' || payload FROM butler_reminders "
                   "WHERE reminder_id = $1::uuid",
                   reminder),
            "cancelled sdk " + version + " reminder");
  auto peer_work = str(calls["route_to"], "work_id");
  EXPECT_TRUE(eventually(
    [&] {
      return query1("SELECT butler || ' ' || trigger_source || ' ' || "
                    "origin_butler || ' ' || request_id || ' ' || state FROM "
                    "route_work WHERE work_id = $1::uuid",
                    peer_work)
             == "peer trigger sdk " + request + " ok";
    },
    20s))
    << node_->log();
  EXPECT_EQ(query1("SELECT string_agg(attempts::text, ',') FROM route_work "
                   "WHERE butler = 'sdk' AND request_id = $1::uuid",
                   request),
            "1");
  // Every call the SDK made is recorded with its outcome (recording is
  // asynchronous: wait for the last ones).
  std::string expected
    = "approval_prompt:ok,notify:ok,recall:ok,remind:ok,remind_cancel:ok,"
      "remind_list:ok x2,route_to:ok,state_delete:ok,state_get:ok x2,"
      "state_list:ok,state_put:invalid_arguments,state_put:ok x2";
  std::string got;
  EXPECT_TRUE(eventually(
    [&] {
      got = query1(
        "SELECT string_agg(tool || ':' || outcome || CASE WHEN n > 1 THEN "
        "' x' || n ELSE '' END, ',' ORDER BY tool, outcome) FROM (SELECT "
        "tool, outcome, count(*) AS n FROM tool_calls WHERE request_id = "
        "$1::uuid AND butler = 'sdk' GROUP BY tool, outcome) c",
        request);
      return got == expected;
    },
    20s))
    << got;
}

void McpSdk::conformance(const std::string& version) {
  ASSERT_TRUE(start_node(config(version)));
  rapidjson::Document summary;
  auto request = run(version, summary);
  auto text = read_file(summary_path());
  ASSERT_NO_FATAL_FAILURE(expect_summary(summary, version, text));
  ASSERT_NO_FATAL_FAILURE(expect_exchanges(summary, version));
  // The session's answer ends the request.
  EXPECT_TRUE(eventually(
    [&] {
      return lifecycle(request) == "parsed";
    },
    20s))
    << lifecycle(request) << "\n"
    << node_->log();
  expect_effects(summary, version, request);
}

TEST_F(McpSdk, TheSdkClientUsesEveryToolWithProtocol2025_11_25) {
  conformance("2025-11-25");
}

TEST_F(McpSdk, TheSdkClientUsesEveryToolWithProtocol2025_06_18) {
  conformance("2025-06-18");
}

} // namespace
} // namespace butlers::test
