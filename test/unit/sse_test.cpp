// The incremental SSE parser: fields, multi-line data, comments, line
// endings, a BOM, the bound, and chunks split anywhere (every byte of the
// recorded model streams).

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "runtime/sse.hpp"

namespace butlers {
namespace {

std::vector<sse_event> parse_all(sse_parser& p, std::string_view text) {
  std::vector<sse_event> out;
  p.feed(text, [&](sse_event& ev) {
    out.push_back(ev);
  });
  return out;
}

std::vector<sse_event> parse_all(std::string_view text) {
  sse_parser p;
  return parse_all(p, text);
}

/// The same text fed in pieces of `piece` bytes (1 = byte by byte).
std::vector<sse_event> parse_in_pieces(std::string_view text, size_t piece) {
  sse_parser p;
  std::vector<sse_event> out;
  for (size_t i = 0; i < text.size(); i += piece)
    p.feed(text.substr(i, piece), [&](sse_event& ev) {
      out.push_back(ev);
    });
  return out;
}

/// The text fed as two chunks split at `at`.
std::vector<sse_event> parse_split(std::string_view text, size_t at) {
  sse_parser p;
  std::vector<sse_event> out;
  auto add = [&](sse_event& ev) {
    out.push_back(ev);
  };
  p.feed(text.substr(0, at), add);
  p.feed(text.substr(at), add);
  return out;
}

bool same(const std::vector<sse_event>& a, const std::vector<sse_event>& b) {
  if (a.size() != b.size())
    return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i].type != b[i].type || a[i].data != b[i].data || a[i].id != b[i].id)
      return false;
  return true;
}

std::string fixture(const std::string& path) {
  std::ifstream in{BUTLERS_SOURCE_DIR "/test/fixtures/" + path,
                   std::ios::binary};
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string with_crlf(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '\n')
      out += '\r';
    out += c;
  }
  return out;
}

const std::vector<std::string> fixtures{
  "openai/chat_stream.sse",    "openai/llama_server.sse",
  "openai/stream_error.sse",   "anthropic/messages_stream.sse",
  "anthropic/cache_usage.sse", "anthropic/stream_error.sse",
};

TEST(sse, fields_comments_and_multiline_data) {
  auto events = parse_all(": a comment\n"
                          "event: update\n"
                          "id: 7\n"
                          "data: first\n"
                          "data:second\n"
                          "data\n"
                          "unknown: ignored\n"
                          "\n"
                          "data: {\"x\":1}\n"
                          "\n");
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].type, "update");
  EXPECT_EQ(events[0].data, "first\nsecond\n") << "one space dropped, no more";
  EXPECT_EQ(events[0].id, "7");
  EXPECT_EQ(events[1].type, "") << "the type resets after each event";
  EXPECT_EQ(events[1].data, "{\"x\":1}");
  EXPECT_EQ(events[1].id, "7") << "the last event id persists";
}

TEST(sse, events_without_data_and_unterminated_events_are_not_dispatched) {
  auto events = parse_all("event: ping\n\n: keep-alive\n\ndata: tail");
  EXPECT_TRUE(events.empty());
  auto empty_data = parse_all("data:\n\n");
  ASSERT_EQ(empty_data.size(), 1u) << "an empty data line is data";
  EXPECT_EQ(empty_data[0].data, "");
}

TEST(sse, line_endings_crlf_cr_and_lf_mix) {
  auto events = parse_all("data: a\r\n\r\ndata: b\r\rdata: c\n\n");
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(events[0].data, "a");
  EXPECT_EQ(events[1].data, "b");
  EXPECT_EQ(events[2].data, "c");
  // A CRLF split between two chunks is one line ending, not two.
  auto split = parse_split("data: a\r\ndata: b\r\n\r\n", 8);
  ASSERT_EQ(split.size(), 1u);
  EXPECT_EQ(split[0].data, "a\nb");
}

TEST(sse, retry_and_a_leading_bom) {
  sse_parser p;
  auto events = parse_all(p, "\xEF\xBB\xBFretry: 2500\ndata: x\n\n");
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].data, "x");
  ASSERT_TRUE(p.retry_ms());
  EXPECT_EQ(*p.retry_ms(), 2500u);
  // The BOM split over chunks, byte by byte.
  auto bytes = parse_in_pieces("\xEF\xBB\xBF"
                               "data: y\n\n",
                               1);
  ASSERT_EQ(bytes.size(), 1u);
  EXPECT_EQ(bytes[0].data, "y");
  // Only a leading BOM is skipped; "retry: x1" is no retry.
  sse_parser q;
  parse_all(q, "retry: x1\ndata: z\n\n");
  EXPECT_FALSE(q.retry_ms());
}

TEST(sse, a_line_or_event_over_the_bound_fails_the_stream) {
  sse_parser p{16};
  EXPECT_TRUE(p.feed("data: 0123456789\n", [](sse_event&) {}));
  EXPECT_FALSE(p.feed("data: 0123456789\n\n", [](sse_event&) {}))
    << "the event's data grew past 16 bytes";
  EXPECT_TRUE(p.failed());
  EXPECT_FALSE(p.feed("data: x\n\n", [](sse_event&) {}));
  sse_parser q{16};
  EXPECT_FALSE(q.feed(std::string(17, 'a'), [](sse_event&) {}))
    << "a line without its end counts too";
}

TEST(sse, every_fixture_parses_the_same_split_at_every_byte) {
  for (auto& name : fixtures) {
    auto text = fixture(name);
    ASSERT_FALSE(text.empty()) << name;
    for (const auto& variant : {text, with_crlf(text)}) {
      auto whole = parse_all(variant);
      ASSERT_GE(whole.size(), 3u) << name;
      for (size_t at = 0; at <= variant.size(); ++at)
        ASSERT_TRUE(same(whole, parse_split(variant, at)))
          << name << " split at byte " << at;
      EXPECT_TRUE(same(whole, parse_in_pieces(variant, 1))) << name;
      EXPECT_TRUE(same(whole, parse_in_pieces(variant, 7))) << name;
    }
  }
}

} // namespace
} // namespace butlers
