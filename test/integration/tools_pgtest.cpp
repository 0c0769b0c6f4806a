// The tool server against a real node process and PostgreSQL, over MCP's
// Streamable HTTP on loopback. A session's capability token reaches a test
// the way it reaches a CLI: the butler's runtime is a real subprocess (sh)
// that writes BUTLERS_MCP_URL and BUTLERS_MCP_TOKEN to a file and waits,
// so the test speaks MCP with the live token of a running session.

#include <signal.h>

#include <chrono>
#include <fstream>
#include <map>
#include <thread>

#include <gtest/gtest.h>
#include <pqxx/pqxx>

#include "runtime/json.hpp"
#include "runtime/route.hpp"
#include "runtime/uuid.hpp"
#include "test/support/fake_telegram.hpp"
#include "test/support/node_fixture.hpp"
#include "test/support/poll.hpp"

namespace butlers::test {
namespace {

using namespace std::chrono_literals;

std::string route_json(const std::string& butler, const std::string& prompt,
                       const std::string& sender = "user-1") {
  route_envelope env;
  env.request_id = make_uuid_v7().to_string();
  env.received_at = "2026-11-28T20:00:00Z";
  env.source_channel = "api";
  env.source_endpoint_identity = "tests";
  env.source_sender_identity = sender;
  env.butler = butler;
  env.tool = "route.execute";
  env.prompt = prompt;
  return make_route_json(env);
}

rapidjson::Document parse(const std::string& body) {
  rapidjson::Document d;
  EXPECT_FALSE(json::parse(body, d)) << body;
  return d;
}

/// A butler whose session is `sh`: it writes its MCP URL and token to
/// DIR/token-<work id> and waits (up to a minute) until cancelled.
std::string token_butler(const std::string& name, const std::string& dir,
                         const std::string& extra = "") {
  return "[[butler]]\nname = \"" + name + "\"\nmax_concurrent_sessions = 4\n"
         + extra
         + "[butler.runtime]\nkind = \"cli\"\nfamily = \"opencode\"\n"
           "command = [\"sh\", \"-c\", \"cat > /dev/null; printf "
           "'%s\\\\n%s\\\\n' "
           "\\\"$BUTLERS_MCP_URL\\\" \\\"$BUTLERS_MCP_TOKEN\\\" > "
         + dir + "/token.tmp-$BUTLERS_WORK_ID && mv " + dir
         + "/token.tmp-$BUTLERS_WORK_ID " + dir
         + "/token-$BUTLERS_WORK_ID; sleep 60\"]\n";
}

class ToolsMcp : public node_fixture {
 protected:
  void start(const std::string& butlers) {
    use_database("tools_mcp");
    use_files("tools_mcp");
    ASSERT_TRUE(start_node(node_head("tools-test", 5) + butlers
                           + "[[messenger.adapter]]\nkind = \"outbox\"\n"
                             "path = \""
                           + dir_ + "/outbox.jsonl\"\n"));
  }

  /// Routes a request to `butler` and waits for its session's token.
  std::string session_token(const std::string& butler,
                            std::string* work_id = nullptr,
                            const std::string& sender = "user-1") {
    auto r = http_->post("/v1/butlers/" + butler + "/route",
                         route_json(butler, "hello", sender));
    EXPECT_EQ(r.status, 202) << r.body;
    auto d = parse(r.body);
    std::string work = d.HasMember("result") && d["result"].HasMember("work_id")
                         ? d["result"]["work_id"].GetString()
                         : "";
    if (work_id)
      *work_id = work;
    return token_of(work);
  }

  /// The token the session of work item `work` wrote (waits for it).
  std::string token_of(const std::string& work) {
    auto path = dir_ + "/token-" + work;
    EXPECT_TRUE(eventually(
      [&] {
        return read_file(path).find("bt_") != std::string::npos;
      },
      20s))
      << node_->log();
    auto text = read_file(path);
    auto nl = text.find('\n');
    EXPECT_EQ(text.substr(0, nl),
              "http://127.0.0.1:" + std::to_string(port_) + "/mcp");
    return text.substr(nl + 1, text.find('\n', nl + 1) - nl - 1);
  }

  /// One POST to /mcp with `token`, `session` and extra header lines.
  http_response mcp(const std::string& token, const std::string& body,
                    const std::string& session = "",
                    const std::string& extra = "",
                    const std::string& method = "POST") {
    std::string req = method
                      + " /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                        "Connection: close\r\n"
                        "Content-Type: application/json\r\n"
                        "Accept: application/json, text/event-stream\r\n";
    if (!token.empty())
      req += "Authorization: Bearer " + token + "\r\n";
    if (!session.empty())
      req += "Mcp-Session-Id: " + session + "\r\n";
    req += extra;
    req += "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
    return http_->raw(req);
  }

  /// initialize (+ notifications/initialized): the MCP session id.
  std::string open_session(const std::string& token,
                           const std::string& version = "2025-06-18") {
    auto r = mcp(token,
                 R"({"jsonrpc":"2.0","id":1,"method":"initialize","params":)"
                 R"({"protocolVersion":")"
                   + version
                   + R"(","capabilities":{},"clientInfo":{"name":"t",)"
                     R"("version":"1"}}})");
    EXPECT_EQ(r.status, 200) << r.body;
    auto sid = r.headers["mcp-session-id"];
    EXPECT_FALSE(sid.empty());
    auto n = mcp(token,
                 R"({"jsonrpc":"2.0","method":"notifications/initialized"})",
                 sid);
    EXPECT_EQ(n.status, 202);
    return sid;
  }

  /// tools/call of `tool` with `arguments`: the JSON-RPC answer.
  rapidjson::Document call(const std::string& token, const std::string& sid,
                           const std::string& tool,
                           const std::string& arguments) {
    auto r = mcp(token,
                 R"({"jsonrpc":"2.0","id":7,"method":"tools/call","params":)"
                 R"({"name":")"
                   + tool + R"(","arguments":)" + arguments + "}}",
                 sid);
    EXPECT_EQ(r.status, 200) << r.body;
    return parse(r.body);
  }

  static std::string text_of(const rapidjson::Document& d) {
    return d["result"]["content"][0]["text"].GetString();
  }

  static bool is_error(const rapidjson::Document& d) {
    return d["result"]["isError"].GetBool();
  }

  double metric(const std::string& series) {
    auto body = http_->get("/metrics").body;
    auto pos = body.find(series + " ");
    return pos == std::string::npos
             ? 0
             : std::stod(body.substr(pos + series.size() + 1));
  }
};

TEST_F(ToolsMcp, AnMcpSessionListsTheToolsAndAnswersPing) {
  use_files("tools_mcp");
  start(token_butler("health", dir_));
  auto token = session_token("health");
  for (auto version : {"2025-06-18", "2025-11-25"}) {
    auto sid = open_session(token, version);
    auto list = parse(
      mcp(token, R"({"jsonrpc":"2.0","id":2,"method":"tools/list"})", sid,
          std::string{"MCP-Protocol-Version: "} + version + "\r\n")
        .body);
    ASSERT_TRUE(list.HasMember("result"));
    std::vector<std::string> names;
    for (auto& t : list["result"]["tools"].GetArray()) {
      names.push_back(t["name"].GetString());
      EXPECT_TRUE(t["inputSchema"].IsObject());
      EXPECT_TRUE(t["outputSchema"].IsObject());
    }
    EXPECT_EQ(names,
              (std::vector<std::string>{"notify", "state_get", "state_put",
                                        "state_list", "state_delete", "remind",
                                        "remind_cancel", "remind_list",
                                        "route_to", "recall",
                                        "approval_prompt"}));
    auto ping = mcp(token, R"({"jsonrpc":"2.0","id":"p","method":"ping"})",
                    sid);
    EXPECT_EQ(ping.body, R"({"jsonrpc":"2.0","id":"p","result":{}})");
  }
}

TEST_F(ToolsMcp, BadInputGetsErrorsThatNameTheProblemAndTheNodeKeepsServing) {
  use_files("tools_mcp");
  start(token_butler("health", dir_));
  auto token = session_token("health");
  // No token, a wrong one: 401 with a challenge.
  auto none = mcp("", R"({"jsonrpc":"2.0","id":1,"method":"ping"})");
  EXPECT_EQ(none.status, 401);
  EXPECT_NE(none.headers["www-authenticate"].find("Bearer"), std::string::npos);
  EXPECT_EQ(mcp("bt_" + std::string(64, 'a'),
                R"({"jsonrpc":"2.0","id":1,"method":"ping"})")
              .status,
            401);
  // A browser page of another origin.
  auto evil = mcp(token, R"({"jsonrpc":"2.0","id":1,"method":"ping"})", "",
                  "Origin: http://evil.example\r\n");
  EXPECT_EQ(evil.status, 403);
  EXPECT_NE(evil.body.find("evil.example"), std::string::npos);
  // Not JSON, a batch, not JSON-RPC.
  auto bad = mcp(token, "{\"jsonrpc\":");
  EXPECT_EQ(bad.status, 400);
  EXPECT_EQ(parse(bad.body)["error"]["code"].GetInt(), -32700);
  auto batch = mcp(token, R"([{"jsonrpc":"2.0","id":1,"method":"ping"}])");
  EXPECT_EQ(batch.status, 400);
  EXPECT_NE(batch.body.find("batch"), std::string::npos);
  auto plain = mcp(token, R"({"id":1,"method":"ping"})");
  EXPECT_EQ(plain.status, 400);
  EXPECT_EQ(parse(plain.body)["error"]["code"].GetInt(), -32600);
  // No session yet, an unknown one.
  auto nosid = mcp(token, R"({"jsonrpc":"2.0","id":1,"method":"tools/list"})");
  EXPECT_EQ(nosid.status, 400);
  EXPECT_NE(nosid.body.find("Mcp-Session-Id"), std::string::npos);
  EXPECT_EQ(mcp(token, R"({"jsonrpc":"2.0","id":1,"method":"tools/list"})",
                "0123456789abcdef0123456789abcdef")
              .status,
            404);
  auto sid = open_session(token);
  // Notifications name their session and version too.
  auto note = R"({"jsonrpc":"2.0","method":"notifications/cancelled"})";
  EXPECT_EQ(mcp(token, note).status, 400);
  EXPECT_EQ(mcp(token, note, "0123456789abcdef0123456789abcdef").status, 404);
  EXPECT_EQ(mcp(token, note, sid, "MCP-Protocol-Version: 1999-01-01\r\n")
              .status,
            400);
  EXPECT_EQ(mcp(token, note, sid).status, 202);
  auto version = mcp(token, R"({"jsonrpc":"2.0","id":1,"method":"ping"})", sid,
                     "MCP-Protocol-Version: 1999-01-01\r\n");
  EXPECT_EQ(version.status, 400);
  EXPECT_NE(version.body.find("1999-01-01"), std::string::npos);
  // Unknown method, unknown tool, bad arguments, arguments not an object.
  auto method = parse(
    mcp(token, R"({"jsonrpc":"2.0","id":3,"method":"resources/list"})", sid)
      .body);
  EXPECT_EQ(method["error"]["code"].GetInt(), -32601);
  EXPECT_NE(std::string{method["error"]["message"].GetString()}.find(
              "resources/list"),
            std::string::npos);
  auto unknown = call(token, sid, "teleport", "{}");
  EXPECT_EQ(unknown["error"]["code"].GetInt(), -32602);
  EXPECT_NE(std::string{unknown["error"]["message"].GetString()}.find(
              "teleport"),
            std::string::npos);
  auto args = call(token, sid, "state_put", R"({"key":7})");
  EXPECT_TRUE(is_error(args));
  EXPECT_NE(text_of(args).find("value"), std::string::npos) << text_of(args);
  EXPECT_NE(text_of(args).find("/key"), std::string::npos) << text_of(args);
  auto notobj = parse(
    mcp(token,
        R"({"jsonrpc":"2.0","id":4,"method":"tools/call","params":)"
        R"({"name":"state_get","arguments":[1]}})",
        sid)
      .body);
  EXPECT_EQ(notobj["error"]["code"].GetInt(), -32602);
  // GET opens no stream; the node still serves.
  EXPECT_EQ(mcp(token, "", sid, "", "GET").status, 405);
  auto ok = call(token, sid, "state_put", R"({"key":"k","value":[1,2]})");
  EXPECT_FALSE(is_error(ok)) << text_of(ok);
  EXPECT_EQ(ok["result"]["structuredContent"]["version"].GetInt(), 1);
  // DELETE ends the MCP session.
  EXPECT_EQ(mcp(token, "", sid, "", "DELETE").status, 204);
  EXPECT_EQ(mcp(token, R"({"jsonrpc":"2.0","id":1,"method":"ping"})", sid)
              .status,
            404);
}

TEST_F(ToolsMcp, TwoSessionsCompareAndSetTheSameKeyAndExactlyOneWins) {
  use_files("tools_mcp");
  start(token_butler("health", dir_));
  auto a = session_token("health");
  auto b = session_token("health");
  ASSERT_NE(a, b);
  auto sa = open_session(a);
  auto sb = open_session(b);
  auto first = call(a, sa, "state_put", R"({"key":"dose","value":1})");
  ASSERT_FALSE(is_error(first)) << text_of(first);
  for (int round = 1; round <= 5; ++round) {
    auto put = R"({"key":"dose","value":")" + std::to_string(round)
               + R"(","expected_version":)" + std::to_string(round) + "}";
    rapidjson::Document ra, rb;
    std::thread ta{[&] {
      ra = call(a, sa, "state_put", put);
    }};
    std::thread tb{[&] {
      rb = call(b, sb, "state_put", put);
    }};
    ta.join();
    tb.join();
    ASSERT_NE(is_error(ra), is_error(rb))
      << text_of(ra) << " / " << text_of(rb);
    auto& lost = is_error(ra) ? ra : rb;
    auto& won = is_error(ra) ? rb : ra;
    EXPECT_EQ(won["result"]["structuredContent"]["version"].GetInt(),
              round + 1);
    EXPECT_NE(text_of(lost).find("conflict"), std::string::npos);
    EXPECT_NE(text_of(lost).find("at version " + std::to_string(round + 1)),
              std::string::npos)
      << text_of(lost);
  }
  auto absent = call(a, sa, "state_put",
                     R"({"key":"dose","value":0,"expected_version":0})");
  EXPECT_TRUE(is_error(absent));
  EXPECT_NE(text_of(absent).find("at version 6"), std::string::npos);
}

TEST_F(ToolsMcp, ATokenReachesOnlyItsButlersStateAndAllowedRecipients) {
  use_files("tools_mcp");
  start(token_butler("health", dir_, "recipients = [\"telegram:777\"]\n")
        + token_butler("finance", dir_));
  auto h = session_token("health");
  auto f = session_token("finance");
  auto sh = open_session(h);
  auto sf = open_session(f);
  ASSERT_FALSE(
    is_error(call(h, sh, "state_put", R"({"key":"secret","value":"x"})")));
  // finance reads its own namespace: nothing there.
  auto peek = call(f, sf, "state_get", R"({"key":"secret"})");
  EXPECT_FALSE(peek["result"]["structuredContent"]["found"].GetBool());
  // A session of finance cannot use health's MCP session either.
  EXPECT_EQ(mcp(f, R"({"jsonrpc":"2.0","id":1,"method":"ping"})", sh).status,
            404);
  // Per-sender scope: another person of the same butler sees nothing.
  ASSERT_FALSE(is_error(
    call(h, sh, "state_put", R"({"key":"mine","value":1,"scope":"sender"})")));
  auto other = session_token("health", nullptr, "user-2");
  auto so = open_session(other);
  auto theirs = call(other, so, "state_get",
                     R"({"key":"mine","scope":"sender"})");
  EXPECT_FALSE(theirs["result"]["structuredContent"]["found"].GetBool());
  auto shared = call(other, so, "state_get", R"({"key":"secret"})");
  EXPECT_TRUE(shared["result"]["structuredContent"]["found"].GetBool());
  // A chat outside the allowlist is refused, logged and counted.
  auto before = metric(
    R"(butlers_tool_refusals_total{butler="finance",tool="notify",reason="recipient_refused"})");
  auto refused = call(f, sf, "notify",
                      R"({"message":"hi","channel":"telegram",)"
                      R"("recipient":"777"})");
  EXPECT_TRUE(is_error(refused));
  EXPECT_NE(text_of(refused).find("may not notify telegram:777"),
            std::string::npos);
  EXPECT_EQ(
    metric(
      R"(butlers_tool_refusals_total{butler="finance",tool="notify",reason="recipient_refused"})"),
    before + 1);
  EXPECT_NE(node_->log().find("refused: butler 'finance' may not notify"),
            std::string::npos);
  // health may: its allowlist names the chat (no telegram adapter here, so
  // the delivery itself fails, but the call is not refused for scope).
  auto allowed = call(h, sh, "notify",
                      R"({"message":"hi","channel":"telegram",)"
                      R"("recipient":"777"})");
  EXPECT_EQ(text_of(allowed).find("may not notify"), std::string::npos)
    << text_of(allowed);
}

TEST_F(ToolsMcp, ATokenOfAnEndedSessionGets401) {
  use_files("tools_mcp");
  start(token_butler("health", dir_));
  std::string work;
  auto token = session_token("health", &work);
  auto sid = open_session(token);
  EXPECT_FALSE(is_error(call(token, sid, "recall", "{}")));
  auto c = http_->post("/v1/butlers/health/work/" + work + "/cancel", "{}");
  ASSERT_EQ(c.status, 200) << c.body;
  ASSERT_TRUE(eventually(
    [&] {
      return mcp(token, R"({"jsonrpc":"2.0","id":1,"method":"ping"})", sid)
               .status
             == 401;
    },
    10s));
  auto late = mcp(token,
                  R"({"jsonrpc":"2.0","id":1,"method":"tools/call","params":)"
                  R"({"name":"state_get","arguments":{"key":"k"}}})",
                  sid);
  EXPECT_EQ(late.status, 401);
}

TEST_F(ToolsMcp, NotifyIsDeliveredInOrderAndARetriedCallSendsNothingTwice) {
  use_files("tools_mcp");
  start(token_butler("health", dir_));
  auto token = session_token("health");
  auto sid = open_session(token);
  auto one = call(token, sid, "notify", R"({"message":"first"})");
  auto two = call(token, sid, "notify", R"({"message":"second"})");
  ASSERT_FALSE(is_error(one)) << text_of(one);
  ASSERT_FALSE(is_error(two)) << text_of(two);
  EXPECT_EQ(std::string{one["result"]["structuredContent"]["status"]
                          .GetString()},
            "delivered");
  EXPECT_EQ(one["result"]["structuredContent"]["sequence"].GetInt(), 0);
  EXPECT_EQ(two["result"]["structuredContent"]["sequence"].GetInt(), 1);
  auto outbox = read_file(dir_ + "/outbox.jsonl");
  auto a = outbox.find("\"first\"");
  auto b = outbox.find("\"second\"");
  ASSERT_NE(a, std::string::npos) << outbox;
  ASSERT_NE(b, std::string::npos) << outbox;
  EXPECT_LT(a, b);
  // The messenger's work item of a notify is keyed by (work item, call
  // number): stored once.
  pqxx::connection conn{url_};
  pqxx::nontransaction tx{conn};
  auto n = tx.exec1("SELECT count(*) FROM route_work WHERE butler = "
                    "'messenger' AND trigger_source = 'tool'")[0]
             .as<int>();
  EXPECT_EQ(n, 2);
}

TEST_F(ToolsMcp, AReminderFiresOnceAndItsSessionReachesTheAsker) {
  use_files("tools_mcp");
  start(token_butler("health", dir_));
  auto token = session_token("health");
  auto sid = open_session(token);
  auto set = call(token, sid, "remind",
                  R"({"after_s":1,"message":"take the blue pill"})");
  ASSERT_FALSE(is_error(set)) << text_of(set);
  std::string id = set["result"]["structuredContent"]["reminder_id"]
                     .GetString();
  auto listed = call(token, sid, "remind_list", "{}");
  EXPECT_NE(text_of(listed).find(id), std::string::npos);
  pqxx::connection conn{url_};
  ASSERT_TRUE(eventually(
    [&] {
      pqxx::nontransaction tx{conn};
      return tx.exec_params1("SELECT count(*) FROM butler_reminders WHERE "
                             "reminder_id = $1 AND state = 'fired'",
                             id)[0]
               .as<int>()
             == 1;
    },
    20s))
    << node_->log();
  // One work item, whose session got the asker's address and the message.
  pqxx::nontransaction tx{conn};
  auto rows = tx.exec_params("SELECT work_id::text, envelope::text FROM "
                             "route_work "
                             "WHERE request_id = $1",
                             id);
  ASSERT_EQ(rows.size(), 1u);
  auto envelope = rows[0][1].as<std::string>();
  EXPECT_NE(envelope.find("take the blue pill"), std::string::npos);
  EXPECT_NE(envelope.find("\"source_sender_identity\":\"user-1\""),
            std::string::npos)
    << envelope;
  auto fired_token = token_of(rows[0][0].as<std::string>());
  auto fs = open_session(fired_token);
  auto recall = call(fired_token, fs, "recall", "{}");
  EXPECT_NE(text_of(recall).find("\"trigger\":\"reminder\""),
            std::string::npos);
  // A cancelled reminder never fires.
  auto later = call(token, sid, "remind",
                    R"({"after_s":3600,"message":"later"})");
  std::string later_id = later["result"]["structuredContent"]["reminder_id"]
                           .GetString();
  auto cancel = call(token, sid, "remind_cancel",
                     R"({"reminder_id":")" + later_id + "\"}");
  EXPECT_TRUE(cancel["result"]["structuredContent"]["cancelled"].GetBool());
  auto again = call(token, sid, "remind_cancel",
                    R"({"reminder_id":")" + later_id + "\"}");
  EXPECT_FALSE(again["result"]["structuredContent"]["cancelled"].GetBool());
}

TEST_F(ToolsMcp, ToolCallsShowInTheRequestWithTheirArgumentsRedacted) {
  use_files("tools_mcp");
  start(token_butler("health", dir_, "keywords = [\"pill\"]\n"));
  auto body
    = R"({"schema_version":"ingest.v1","source":{"channel":"api",)"
      R"("provider":"internal","endpoint_identity":"tests"},"event":)"
      R"({"external_event_id":"e-1","observed_at":"2026-11-28T20:00:00Z"},)"
      R"("sender":{"identity":"user-1"},"payload":{"raw":{},)"
      R"("normalized_text":"my pill"}})";
  auto r = http_->post("/v1/ingest", body);
  ASSERT_EQ(r.status, 202) << r.body;
  std::string request = parse(r.body)["request_id"].GetString();
  // The work id is the routed item's: find it in the database.
  std::string work;
  ASSERT_TRUE(eventually(
    [&] {
      pqxx::connection conn{url_};
      pqxx::nontransaction tx{conn};
      auto rows = tx.exec_params("SELECT work_id::text FROM route_work "
                                 "WHERE request_id = $1 AND butler = 'health'",
                                 request);
      if (rows.empty())
        return false;
      work = rows[0][0].as<std::string>();
      return true;
    },
    20s));
  auto token = token_of(work);
  auto sid = open_session(token);
  ASSERT_FALSE(is_error(call(token, sid, "state_put",
                             R"({"key":"diary","value":"private words"})")));
  EXPECT_TRUE(is_error(call(token, sid, "state_get", R"({"key":1})")));
  ASSERT_TRUE(eventually(
    [&] {
      return http_->get("/v1/requests/" + request).body.find("state_get")
             != std::string::npos;
    },
    10s));
  auto inspect = http_->get("/v1/requests/" + request);
  ASSERT_EQ(inspect.status, 200);
  auto d = parse(inspect.body);
  auto& calls = d["tool_calls"];
  ASSERT_EQ(calls.Size(), 2u) << inspect.body;
  EXPECT_EQ(std::string{calls[0]["tool"].GetString()}, "state_put");
  EXPECT_EQ(std::string{calls[0]["outcome"].GetString()}, "ok");
  EXPECT_EQ(std::string{calls[1]["outcome"].GetString()}, "invalid_arguments");
  EXPECT_TRUE(calls[0]["arguments"]["redacted"].GetBool());
  EXPECT_EQ(inspect.body.find("private words"), std::string::npos);
  EXPECT_EQ(
    metric(
      R"(butlers_tool_calls_total{butler="health",tool="state_put",outcome="ok"})"),
    1);
}

TEST_F(ToolsMcp, AReminderFiresOnceWithTwoNodesAndAcrossASigkill) {
  use_files("tools_mcp");
  auto config = node_head("tools-test", 5) + token_butler("health", dir_)
                + "[tools]\nreminder_poll_ms = 100\n"
                  "[[messenger.adapter]]\nkind = \"outbox\"\npath = \""
                + dir_ + "/outbox.jsonl\"\n";
  use_database("tools_mcp");
  ASSERT_TRUE(start_node(config));
  // A second node on the same database hosts the same butler and sweeps
  // for reminders too.
  node_process second{config, {{"BUTLERS_DATABASE_URL", url_}}};
  ASSERT_TRUE(second.wait_listening(30s)) << second.log();
  auto token = session_token("health");
  auto sid = open_session(token);
  auto one = call(token, sid, "remind", R"({"after_s":2,"message":"one"})");
  auto two = call(token, sid, "remind", R"({"after_s":3,"message":"two"})");
  ASSERT_FALSE(is_error(one)) << text_of(one);
  ASSERT_FALSE(is_error(two)) << text_of(two);
  std::string id1 = one["result"]["structuredContent"]["reminder_id"]
                      .GetString();
  std::string id2 = two["result"]["structuredContent"]["reminder_id"]
                      .GetString();
  // The first node dies before the second reminder is due, and comes back.
  pqxx::connection conn{url_};
  auto state_of = [&](const std::string& id) {
    pqxx::nontransaction tx{conn};
    return tx
      .exec_params1("SELECT state FROM butler_reminders WHERE reminder_id "
                    "= $1",
                    id)[0]
      .as<std::string>();
  };
  ASSERT_EQ(state_of(id2), "pending");
  ASSERT_TRUE(kill_node());
  node_.reset();
  ASSERT_TRUE(start_node(config));
  for (auto& id : {id1, id2}) {
    ASSERT_TRUE(eventually(
      [&] {
        return state_of(id) == "fired";
      },
      20s))
      << id << "\n"
      << node_->log();
    pqxx::nontransaction tx{conn};
    auto rows = tx.exec_params("SELECT attempts FROM route_work WHERE "
                               "request_id = $1",
                               id);
    ASSERT_EQ(rows.size(), 1u) << id;
    // One session for it: started once (or, when it ran on the node that
    // was killed, once more after the restart, as any work item).
    EXPECT_GE(rows[0][0].as<int>(), 1);
  }
  pqxx::nontransaction tx{conn};
  EXPECT_EQ(tx.exec1("SELECT count(*) FROM route_work WHERE segment_id = "
                     "'reminder'")[0]
              .as<int>(),
            2);
  second.signal(SIGTERM);
  EXPECT_TRUE(second.wait_exit(15s));
}

TEST_F(ToolsMcp, AnExternalWorkerGetsTheItemsToolsUntilItAcks) {
  use_files("tools_mcp");
  start("[[butler]]\nname = \"ext\"\n[butler.runtime]\nkind = "
        "\"external\"\n");
  auto r = http_->post("/v1/butlers/ext/route", route_json("ext", "hello"));
  ASSERT_EQ(r.status, 202) << r.body;
  auto got = http_->post("/v1/butlers/ext/work/recv",
                         R"({"max":1,"wait_ms":5000})");
  ASSERT_EQ(got.status, 200) << got.body;
  auto d = parse(got.body);
  ASSERT_EQ(d["items"].Size(), 1u) << got.body;
  auto& item = d["items"][0];
  ASSERT_TRUE(item.HasMember("tools")) << got.body;
  EXPECT_EQ(std::string{item["tools"]["url"].GetString()},
            "http://127.0.0.1:" + std::to_string(port_) + "/mcp");
  std::string token = item["tools"]["token"].GetString();
  std::string work = item["work_id"].GetString();
  std::string lease = item["lease_token"].GetString();
  auto sid = open_session(token);
  auto put = call(token, sid, "state_put", R"({"key":"k","value":1})");
  EXPECT_FALSE(is_error(put)) << text_of(put);
  auto ack = http_->post("/v1/butlers/ext/work/" + work + "/ack",
                         R"({"lease_token":")" + lease
                           + R"(","reply":"done"})");
  ASSERT_EQ(ack.status, 200) << ack.body;
  EXPECT_EQ(mcp(token, R"({"jsonrpc":"2.0","id":1,"method":"ping"})", sid)
              .status,
            401);
}

} // namespace
} // namespace butlers::test
