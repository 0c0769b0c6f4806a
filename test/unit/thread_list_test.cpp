// The pure parts of the thread list API: titles and previews cut on UTF-8
// boundaries, the opaque page cursor (a tampered one is refused, never
// passed on), the query parameters, and the JSON of a page and a snapshot.

#include <gtest/gtest.h>

#include "runtime/json.hpp"
#include "runtime/thread_list.hpp"

namespace butlers {
namespace {

using row = std::vector<std::string>;

/// A thread_list.sql row.
row list_row(const std::string& id, const std::string& at_us,
             const std::string& state = "ok") {
  return {id, at_us, "first words", "last words", state, "", "", "7"};
}

TEST(ThreadList, ShortTextIsKeptWhole) {
  EXPECT_EQ(ellipsize_utf8("hello", 5), "hello");
  EXPECT_EQ(ellipsize_utf8("", 5), "");
}

TEST(ThreadList, LongTextIsCutWithAnEllipsisWithinTheBound) {
  auto out = ellipsize_utf8("abcdefghij", 8);
  EXPECT_EQ(out, "abcde\xE2\x80\xA6");
  EXPECT_LE(out.size(), 8u);
}

TEST(ThreadList, ACutNeverSplitsAMultiByteCharacter) {
  // "é" is two bytes, "€" three: a cut that would land inside either backs
  // up to the character's first byte.
  std::string text = "\xC3\xA9\xC3\xA9\xE2\x82\xAC\xE2\x82\xAC\xE2\x82\xAC";
  for (size_t max = 3; max < text.size(); ++max) {
    auto out = ellipsize_utf8(text, max);
    ASSERT_LE(out.size(), max);
    auto body = out.substr(0, out.size() - 3);
    EXPECT_EQ(text.compare(0, body.size(), body), 0) << max;
    if (!body.empty()) {
      auto next = static_cast<unsigned char>(text[body.size()]);
      EXPECT_NE(next & 0xC0, 0x80) << "cut inside a character at " << max;
    }
  }
}

TEST(ThreadList, TheTitleIsTheFirstNonBlankLineWithSpacesCollapsed) {
  EXPECT_EQ(thread_title("\n  \n  plan   my\tweek \nand more"), "plan my week");
  EXPECT_EQ(thread_title(""), "");
  auto long_title = thread_title(std::string(200, 'x'));
  EXPECT_EQ(long_title.size(), thread_title_max_bytes);
}

TEST(ThreadList, ThePreviewJoinsLinesAndIsBounded) {
  EXPECT_EQ(thread_preview(" a\n\nb  c "), "a b c");
  EXPECT_LE(thread_preview(std::string(1000, 'y')).size(),
            thread_preview_max_bytes);
}

TEST(ThreadList, ACursorRoundTripsAndIsOpaque) {
  thread_cursor c{1795917319346779, "chat-1"};
  auto x = encode_thread_cursor(c);
  EXPECT_EQ(x.find("chat-1"), std::string::npos);
  auto back = decode_thread_cursor(x);
  ASSERT_TRUE(back);
  EXPECT_EQ(*back, c);
}

TEST(ThreadList, ATamperedCursorIsRefused) {
  auto x = encode_thread_cursor({1795917319346779, "chat-1"});
  for (size_t i = 0; i < x.size(); ++i) {
    auto y = x;
    y[i] = y[i] == '0' ? '1' : '0';
    EXPECT_FALSE(decode_thread_cursor(y)) << "flipped digit " << i;
  }
  EXPECT_FALSE(decode_thread_cursor(""));
  EXPECT_FALSE(decode_thread_cursor(x.substr(0, x.size() - 1)));
  EXPECT_FALSE(decode_thread_cursor(x.substr(2)));
  EXPECT_FALSE(decode_thread_cursor("zz" + x));
  EXPECT_FALSE(decode_thread_cursor(std::string(5000, 'a')));
  EXPECT_FALSE(decode_thread_cursor("'; DROP TABLE threads; --"));
}

TEST(ThreadList, ACursorWithABadThreadIdOrTimeIsRefused) {
  // Well-formed and checksummed, but naming what no page could end at.
  EXPECT_FALSE(decode_thread_cursor(encode_thread_cursor({5, "bad id"})));
  EXPECT_FALSE(decode_thread_cursor(encode_thread_cursor({-5, "t"})));
}

TEST(ThreadList, QueryDefaultsAndBounds) {
  thread_page_query q;
  EXPECT_FALSE(parse_thread_page_query("", q));
  EXPECT_EQ(q.limit, thread_page_default);
  EXPECT_FALSE(q.after);
  EXPECT_FALSE(parse_thread_page_query("limit=200", q));
  EXPECT_EQ(q.limit, 200);
  auto c = encode_thread_cursor({42, "t-1"});
  EXPECT_FALSE(parse_thread_page_query("limit=2&cursor=" + c, q));
  ASSERT_TRUE(q.after);
  EXPECT_EQ(q.after->thread_id, "t-1");
  EXPECT_EQ(thread_list_params(q), (row{"3", "42", "t-1"}));
}

TEST(ThreadList, BadQueryParametersAre400NamingTheParameter) {
  for (auto bad : {"limit=0", "limit=201", "limit=x", "limit=", "limit=-1",
                   "limit=99999999999999999999"}) {
    thread_page_query q;
    auto r = parse_thread_page_query(bad, q);
    ASSERT_TRUE(r) << bad;
    EXPECT_EQ(r->status, 400);
    EXPECT_NE(r->body.find(R"("parameter":"limit")"), std::string::npos);
  }
  thread_page_query q;
  auto r = parse_thread_page_query("cursor=abc", q);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400);
  EXPECT_NE(r->body.find(R"("parameter":"cursor")"), std::string::npos);
}

TEST(ThreadList, APageWithMoreRowsThanItsLimitHasANextCursor) {
  thread_page_query q;
  q.limit = 2;
  auto json = thread_page_json({list_row("c", "3000"), list_row("b", "2000"),
                                list_row("a", "1000")},
                               q);
  rapidjson::Document doc;
  ASSERT_FALSE(json::parse(json, doc)) << json;
  ASSERT_EQ(doc["threads"].Size(), 2u);
  EXPECT_STREQ(doc["threads"][0]["thread_id"].GetString(), "c");
  EXPECT_STREQ(doc["threads"][0]["title"].GetString(), "first words");
  EXPECT_STREQ(doc["threads"][0]["last_message_preview"].GetString(),
               "last words");
  EXPECT_EQ(doc["threads"][0]["last_message_at_unix_ms"].GetInt64(), 3);
  EXPECT_STREQ(doc["threads"][0]["run_status"].GetString(), "ok");
  EXPECT_TRUE(doc["threads"][0]["run_error"].IsNull());
  ASSERT_TRUE(doc["next_cursor"].IsString());
  auto next = decode_thread_cursor(doc["next_cursor"].GetString());
  ASSERT_TRUE(next);
  EXPECT_EQ(*next, (thread_cursor{2000, "b"}));
  // The last page has none.
  auto last = thread_page_json({list_row("a", "1000")}, q);
  EXPECT_NE(last.find(R"("next_cursor":null)"), std::string::npos);
}

TEST(ThreadList, AFailedRunShowsItsErrorClassAndMessage) {
  thread_page_query q;
  auto r = list_row("a", "1000", "error");
  r[5] = "timeout";
  r[6] = "timeout: the session took too long";
  auto json = thread_page_json({r}, q);
  EXPECT_NE(json.find(R"("run_status":"error","run_error":{"class":"timeout",)"
                      R"("message":"timeout: the session took too long"})"),
            std::string::npos)
    << json;
}

TEST(ThreadList, RunStatusNamesActiveRunsRunning) {
  EXPECT_EQ(run_status_of("accepted"), "running");
  EXPECT_EQ(run_status_of("running"), "running");
  EXPECT_EQ(run_status_of("cancelled"), "cancelled");
  EXPECT_EQ(run_status_of(""), "idle");
  thread_live live;
  EXPECT_EQ(run_status_of(live, "ok"), "ok");
  EXPECT_EQ(run_status_of(live, "running"), "idle")
    << "the actor knows the run ended before the database does";
  live.queued.push_back({"r2", "general", "collecting"});
  EXPECT_EQ(run_status_of(live, "ok"), "collecting");
  live.active.push_back({"r1", "general", "running"});
  EXPECT_EQ(run_status_of(live, "ok"), "running");
}

TEST(ThreadList, ASnapshotTakesItsRunsFromTheLiveActorOrTheDatabase) {
  auto r = list_row("a", "5000", "running");
  r.push_back(R"([{"run_id":"r1","butler":"general","state":"running"},)"
              R"({"run_id":"r2","butler":"general","state":"queued"}])");
  auto from_db = thread_snapshot_json(r, std::nullopt);
  rapidjson::Document doc;
  ASSERT_FALSE(json::parse(from_db, doc)) << from_db;
  EXPECT_FALSE(doc["live"].GetBool());
  EXPECT_STREQ(doc["run_status"].GetString(), "running");
  ASSERT_EQ(doc["active_runs"].Size(), 1u);
  EXPECT_STREQ(doc["active_runs"][0]["run_id"].GetString(), "r1");
  ASSERT_EQ(doc["queued_runs"].Size(), 1u);
  EXPECT_EQ(doc["last_event_cursor"].GetInt64(), 7);
  // Without the approvals column (or with anything but an array): none.
  ASSERT_TRUE(doc["pending_approvals"].IsArray());
  EXPECT_EQ(doc["pending_approvals"].Size(), 0u);
  r.push_back(R"([{"approval_id":"a1","run_id":"r1","tool":"shell",)"
              R"("summary":"ls","status":"pending","expires_at_unix_ms":9}])");
  from_db = thread_snapshot_json(r, std::nullopt);
  ASSERT_FALSE(json::parse(from_db, doc)) << from_db;
  ASSERT_EQ(doc["pending_approvals"].Size(), 1u);
  EXPECT_STREQ(doc["pending_approvals"][0]["approval_id"].GetString(), "a1");
  thread_live live;
  live.pending_turns = 2;
  auto from_actor = thread_snapshot_json(r, live);
  ASSERT_FALSE(json::parse(from_actor, doc)) << from_actor;
  EXPECT_TRUE(doc["live"].GetBool());
  EXPECT_EQ(doc["active_runs"].Size(), 0u);
  EXPECT_EQ(doc["pending_turns"].GetInt(), 2);
  EXPECT_STREQ(doc["run_status"].GetString(), "idle");
}

} // namespace
} // namespace butlers
