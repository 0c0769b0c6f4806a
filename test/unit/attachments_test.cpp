// Attachments, the pure parts: a Telegram message with media mapped to its
// files and its envelope, the ingest boundary's checks of
// payload.attachments, the caps, and the content blocks each runtime is
// given.

#include <atomic>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "runtime/attachments.hpp"
#include "runtime/claude_stream.hpp"
#include "runtime/ingest.hpp"
#include "runtime/json.hpp"
#include "runtime/model_api.hpp"
#include "runtime/route.hpp"
#include "runtime/telegram_files.hpp"
#include "runtime/telegram_update.hpp"

namespace butlers {
namespace {

constexpr int64_t now = 1'795'000'000'000'000; // Unix µs

const std::string sha_a(64, 'a');

std::string photo_update(const std::string& extra = {}) {
  return R"({"update_id":500,"message":{"message_id":7,)"
         R"("from":{"id":42,"is_bot":false,"first_name":"A"},)"
         R"("chat":{"id":42,"type":"private"},"date":1441645532,)"
         R"("photo":[{"file_id":"small","file_unique_id":"s","width":90,)"
         R"("height":60,"file_size":1000},)"
         R"({"file_id":"medium","file_unique_id":"m","width":320,)"
         R"("height":240,"file_size":20000},)"
         R"({"file_id":"large","file_unique_id":"l","width":1280,)"
         R"("height":960,"file_size":300000}])"
         + extra + "}}";
}

std::string ingest_body(const std::string& attachments,
                        const std::string& text = "") {
  return R"({"schema_version":"ingest.v1","source":{"channel":"api",)"
         R"("provider":"internal","endpoint_identity":"e"},)"
         R"("event":{"external_event_id":"x1","observed_at":)"
         R"("2026-11-29T04:00:00Z"},"sender":{"identity":"s"},)"
         R"("payload":{"raw":{},"normalized_text":)"
         + json::quote(text) + R"(,"attachments":)" + attachments + "}}";
}

rapidjson::Document parsed(const std::string& text) {
  rapidjson::Document doc;
  json::parse_limits limits;
  limits.max_bytes = text.size() + 1;
  EXPECT_FALSE(json::parse(text, doc, limits)) << text;
  return doc;
}

attachment_data png(std::string name = "p.png") {
  attachment_data d;
  d.ref.sha256 = sha_a;
  d.ref.media_type = "image/png";
  d.ref.size = 3;
  d.ref.name = std::move(name);
  d.base64 = base64_encode("abc");
  return d;
}

// -- Telegram -----------------------------------------------------------------

TEST(AttachmentsTelegram, APhotoWithoutCaptionIsAnEnvelopeWithItsLargestSize) {
  auto m = map_telegram_update(photo_update(), "bot");
  ASSERT_EQ(m.verdict, update_verdict::envelope) << m.reason;
  EXPECT_FALSE(m.has_text);
  EXPECT_EQ(m.chat_id, 42);
  ASSERT_EQ(m.media.size(), 1u);
  EXPECT_EQ(m.media[0].kind, "photo");
  EXPECT_EQ(m.media[0].file_id, "large");
  EXPECT_EQ(m.media[0].media_type, "image/jpeg");
  EXPECT_EQ(m.media[0].file_size, 300000u);
  auto doc = parsed(m.envelope);
  EXPECT_STREQ(doc["payload"]["normalized_text"].GetString(), "");
}

TEST(AttachmentsTelegram, ThePhotoSizeIsTheLargestThatFitsTheCap) {
  auto m = map_telegram_update(photo_update(), "bot", 50000);
  ASSERT_EQ(m.media.size(), 1u);
  EXPECT_EQ(m.media[0].file_id, "medium");
  // None fits: the smallest, which the connector then refuses.
  auto none = map_telegram_update(photo_update(), "bot", 10);
  ASSERT_EQ(none.media.size(), 1u);
  EXPECT_EQ(none.media[0].file_id, "small");
}

TEST(AttachmentsTelegram, DocumentsVoiceAudioAndVideoKeepTheirTypeAndName) {
  auto m = map_telegram_update(
    R"({"update_id":501,"message":{"message_id":8,"chat":{"id":5},)"
    R"("date":1441645532,"caption":"see",)"
    R"("document":{"file_id":"d","file_name":"minutes.pdf",)"
    R"("mime_type":"application/pdf","file_size":12},)"
    R"("voice":{"file_id":"v","duration":3}}})",
    "bot");
  ASSERT_EQ(m.verdict, update_verdict::envelope) << m.reason;
  EXPECT_TRUE(m.has_text);
  ASSERT_EQ(m.media.size(), 2u);
  EXPECT_EQ(m.media[0].kind, "document");
  EXPECT_EQ(m.media[0].name, "minutes.pdf");
  EXPECT_EQ(m.media[0].media_type, "application/pdf");
  EXPECT_EQ(m.media[1].kind, "voice");
  EXPECT_EQ(m.media[1].media_type, "audio/ogg");
  EXPECT_FALSE(m.media[1].file_size);
}

TEST(AttachmentsTelegram, AStickerIsStillIgnored) {
  auto m = map_telegram_update(
    R"({"update_id":502,"message":{"message_id":1,"chat":{"id":1},)"
    R"("date":1,"sticker":{"file_id":"s"}}})",
    "bot");
  EXPECT_EQ(m.verdict, update_verdict::ignored);
  EXPECT_TRUE(m.media.empty());
}

TEST(AttachmentsTelegram, TheEnvelopeWithItsFilesPassesTheIngestBoundary) {
  auto m = map_telegram_update(photo_update(), "bot");
  attachment_ref ref{sha_a, "image/jpeg", 300000, "photo.jpg"};
  auto envelope = with_attachments(m.envelope, {ref});
  auto r = parse_ingest(envelope, 1 << 20, 300, now);
  ASSERT_TRUE(r.record) << r.parse_error
                        << (r.violations.empty() ? ""
                                                 : r.violations[0].message);
  auto xs = parse_attachments(r.record->attachments);
  ASSERT_EQ(xs.size(), 1u);
  EXPECT_EQ(xs[0].sha256, sha_a);
  EXPECT_EQ(xs[0].size, 300000u);
  EXPECT_EQ(attachments_of_payload(envelope), r.record->attachments);
}

TEST(AttachmentsTelegram, AFileOverTheCapIsRefusedBeforeAnyRequest) {
  telegram_media big{"document", "d", 30u << 20, "application/pdf", "a.pdf"};
  size_t calls = 0;
  auto fetch = [&](const http_request&, const std::atomic<bool>*) {
    ++calls;
    return http_response{};
  };
  attachment_limits caps;
  auto r = fetch_telegram_media({big}, caps, "http://x", "t", fetch, nullptr,
                                nullptr);
  EXPECT_EQ(r.what, media_fetch::kind::refused);
  EXPECT_NE(r.reason.find("'a.pdf' is 30 MB; the limit is 20 MB"),
            std::string::npos)
    << r.reason;
  EXPECT_EQ(calls, 0u);
}

TEST(AttachmentsTelegram, ADownloadPastTheCapIsRefused) {
  // file_size unknown up front; getFile says nothing either; the download
  // is cut at the cap.
  telegram_media v{"voice", "v", std::nullopt, "audio/ogg", "voice.ogg"};
  std::vector<std::string> urls;
  size_t max_seen = 0;
  auto fetch = [&](const http_request& req, const std::atomic<bool>*) {
    urls.push_back(req.url);
    http_response r;
    if (req.url.find("/getFile") != std::string::npos) {
      r.status = 200;
      r.body = R"({"ok":true,"result":{"file_id":"v","file_path":"voice/1"}})";
    } else {
      max_seen = req.max_response_bytes;
      r.failure = http_failure::too_large;
    }
    return r;
  };
  attachment_limits caps;
  caps.max_bytes = 1000;
  // A store is needed past the announced sizes, but nothing reaches it.
  attachment_store store{"host=/nonexistent dbname=none", caps};
  auto r = fetch_telegram_media({v}, caps, "http://api", "T", fetch, &store,
                                nullptr);
  EXPECT_EQ(r.what, media_fetch::kind::refused) << r.reason;
  ASSERT_EQ(urls.size(), 2u);
  EXPECT_EQ(urls[1], "http://api/file/botT/voice/1");
  EXPECT_EQ(max_seen, 1000u);
}

TEST(AttachmentsTelegram, TheRefusalIsASendToTheChat) {
  auto n = attachment_refusal_notify("telegram", "42", "too big", "k1");
  std::string envelope;
  route_envelope env;
  ASSERT_FALSE(make_delivery_route(n, "0190a0b0-0000-7000-8000-000000000000",
                                   now, envelope, &env));
  auto v = read_notify(env.notify_request);
  ASSERT_TRUE(v);
  EXPECT_EQ(v->intent, "send");
  EXPECT_EQ(v->recipient, "42");
  EXPECT_NE(v->message.find("too big"), std::string::npos);
}

// -- the ingest boundary ------------------------------------------------------

TEST(AttachmentsIngest, AMessageOfAttachmentsOnlyIsTaken) {
  auto r = parse_ingest(
    ingest_body(R"([{"sha256":")" + sha_a
                + R"(","media_type":"image/png","size":3,"name":"p.png"}])"),
    1 << 20, 300, now);
  ASSERT_TRUE(r.record);
  EXPECT_EQ(r.record->normalized_text, "");
  EXPECT_EQ(parse_attachments(r.record->attachments).size(), 1u);
}

TEST(AttachmentsIngest, BadEntriesAreNamedByTheirPointer) {
  struct bad_case {
    std::string attachments;
    std::string pointer;
  };
  std::vector<bad_case> cases = {
    {R"([{"sha256":"XYZ","media_type":"image/png","size":3}])",
     "/payload/attachments/0/sha256"},
    {R"([{"sha256":")" + sha_a + R"(","media_type":"image/png"}])",
     "/payload/attachments/0"},
    {R"([{"sha256":")" + sha_a + R"(","media_type":"png","size":3}])",
     "/payload/attachments/0/media_type"},
    {R"([{"sha256":")" + sha_a + R"(","media_type":"image/png","size":-1}])",
     "/payload/attachments/0/size"},
    {R"("photo")", "/payload/attachments"},
  };
  for (auto& c : cases) {
    auto r = parse_ingest(ingest_body(c.attachments), 1 << 20, 300, now);
    EXPECT_FALSE(r.record) << c.attachments;
    ASSERT_FALSE(r.violations.empty()) << c.attachments;
    EXPECT_EQ(r.violations[0].pointer, c.pointer) << r.violations[0].message;
  }
}

TEST(AttachmentsCaps, OverCapNamesTheFileAndTheLimit) {
  attachment_limits caps;
  caps.max_bytes = 1024;
  caps.max_message_bytes = 1536;
  caps.max_count = 2;
  attachment_ref a{sha_a, "image/png", 1000, "a.png"};
  attachment_ref b{sha_a, "image/png", 2048, "b.png"};
  EXPECT_EQ(over_cap({a}, caps), "");
  EXPECT_EQ(over_cap({a, b}, caps),
            "'b.png' is 2 KB; the limit is 1 KB per attachment");
  EXPECT_NE(over_cap({a, a}, caps).find("add up to"), std::string::npos);
  EXPECT_NE(over_cap({a, a, a}, caps).find("at most 2"), std::string::npos);
}

TEST(AttachmentsCaps, Base64RoundTrips) {
  std::vector<std::string> texts{"",    "a",    "ab",
                                 "abc", "abcd", std::string("\0\xff", 2)};
  for (auto& s : texts)
    EXPECT_EQ(base64_decode(base64_encode(s)), s);
  EXPECT_EQ(base64_encode("abc"), "YWJj");
  EXPECT_FALSE(base64_decode("abc"));
}

// -- what the runtimes are given ----------------------------------------------

TEST(AttachmentsBlocks, ClaudeGetsImageAndDocumentBlocks) {
  auto pdf = png("m.pdf");
  pdf.ref.media_type = "application/pdf";
  auto voice = png("v.ogg");
  voice.ref.media_type = "audio/ogg";
  auto line = claude_user_message("look", {png(), pdf, voice});
  auto doc = parsed(line);
  auto& content = doc["message"]["content"];
  ASSERT_EQ(content.Size(), 4u);
  EXPECT_STREQ(content[0]["text"].GetString(), "look");
  EXPECT_STREQ(content[1]["type"].GetString(), "image");
  EXPECT_STREQ(content[1]["source"]["type"].GetString(), "base64");
  EXPECT_STREQ(content[1]["source"]["media_type"].GetString(), "image/png");
  EXPECT_STREQ(content[1]["source"]["data"].GetString(), "YWJj");
  EXPECT_STREQ(content[2]["type"].GetString(), "document");
  EXPECT_STREQ(content[3]["type"].GetString(), "text");
  EXPECT_NE(std::string{content[3]["text"].GetString()}.find("v.ogg"),
            std::string::npos);
}

TEST(AttachmentsBlocks, OpenAIGetsAnImageUrlWithADataUrl) {
  model_call_settings s;
  s.api = model_api::openai;
  s.base_url = "http://x";
  s.model = "m";
  std::vector<chat_message> conversation{{"user", "look"}};
  conversation[0].attachments = std::make_shared<
    const std::vector<attachment_data>>(std::vector<attachment_data>{png()});
  auto r = build_model_request(s, conversation);
  auto doc = parsed(r.body);
  auto& content = doc["messages"][0]["content"];
  ASSERT_TRUE(content.IsArray());
  EXPECT_STREQ(content[1]["type"].GetString(), "image_url");
  EXPECT_STREQ(content[1]["image_url"]["url"].GetString(),
               "data:image/png;base64,YWJj");
}

TEST(AttachmentsBlocks, AnthropicGetsAnImageBlock) {
  model_call_settings s;
  s.api = model_api::anthropic;
  s.base_url = "http://x";
  s.model = "m";
  std::vector<chat_message> conversation{{"user", "look"}};
  conversation[0].attachments = std::make_shared<
    const std::vector<attachment_data>>(std::vector<attachment_data>{png()});
  auto doc = parsed(build_model_request(s, conversation).body);
  auto& content = doc["messages"][0]["content"];
  ASSERT_TRUE(content.IsArray());
  EXPECT_STREQ(content[1]["type"].GetString(), "image");
  EXPECT_STREQ(content[1]["source"]["data"].GetString(), "YWJj");
}

TEST(AttachmentsBlocks, CliRuntimesGetSafeFileNamesListedInThePrompt) {
  attachment_ref r{sha_a, "image/png", 3, "../../etc/passwd"};
  EXPECT_EQ(attachment_file_name(0, r), "1-_.._.._etc_passwd");
  attachment_ref dot{sha_a, "image/png", 3, ".hidden"};
  EXPECT_EQ(attachment_file_name(1, dot), "2-_.hidden");
  auto list = attachment_file_list({r}, {"/tmp/d/1-x"});
  EXPECT_NE(list.find("/tmp/d/1-x (image/png, 3 bytes"), std::string::npos);
}

TEST(AttachmentsBlocks, TheRouteCarriesTheReferences) {
  route_envelope env;
  env.request_id = "0190a0b0-0000-7000-8000-000000000000";
  env.received_at = "2026-11-29T04:00:00Z";
  env.source_channel = "telegram";
  env.source_endpoint_identity = "bot";
  env.source_sender_identity = "42";
  env.butler = "general";
  env.prompt = "(the message has no text)";
  env.attachments = attachments_json({{sha_a, "image/jpeg", 9, "photo.jpg"}});
  route_envelope back;
  ASSERT_FALSE(parse_route(make_route_json(env), back));
  EXPECT_EQ(back.attachments, env.attachments);
}

} // namespace
} // namespace butlers
