// Attachments end to end (runtime/attachments.md), with a real node
// process, real PostgreSQL and the fake Bot API in poll mode: a photo sent
// without a caption is fetched with getFile and the file download, stored
// once in `attachments`, and reaches the butler's model as an image — a
// Claude Code session (butlers-fake-claude logs the blocks it got) and an
// OpenAI-compatible API (the fake model server records them). A file over
// the cap is refused with a message to the person, counted, and leaves
// nothing behind: no attachment row, no inbox row, no download, no file.

#include <dirent.h>
#include <sys/stat.h>

#include <chrono>
#include <fstream>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>
#include <pqxx/pqxx>

#include "runtime/attachments.hpp"
#include "runtime/json.hpp"
#include "test/support/fake_model_server.hpp"
#include "test/support/fake_telegram.hpp"
#include "test/support/node_fixture.hpp"
#include "test/support/node_process.hpp"
#include "test/support/poll.hpp"

namespace butlers::test {
namespace {

using namespace std::chrono_literals;

/// `n` bytes that do not repeat (so their hash is this test's own).
std::string random_bytes(size_t n) {
  std::mt19937_64 rng{std::random_device{}()};
  std::string out(n, '\0');
  for (auto& c : out)
    c = static_cast<char>(rng() & 0xff);
  // A JPEG's start, for the looks of it.
  out[0] = static_cast<char>(0xff);
  out[1] = static_cast<char>(0xd8);
  return out;
}

/// Entries of `dir` whose name starts with `prefix`.
size_t entries_with(const std::string& dir, const std::string& prefix) {
  size_t n = 0;
  if (auto* d = ::opendir(dir.c_str())) {
    while (auto* e = ::readdir(d))
      if (std::string{e->d_name}.rfind(prefix, 0) == 0)
        ++n;
    ::closedir(d);
  }
  return n;
}

class Attachments : public node_fixture {
 protected:
  fake_telegram tg;
  fake_model_server model;
  int64_t chat = 7770001;
  int64_t next_update = 31000;

  void SetUp() override {
    use_database("attachments");
    use_files("attachments");
  }

  /// A node whose `general` butler runs `runtime`, fed by the bot in
  /// `mode` (poll, or webhook with `webhook_secret`), replying through it;
  /// `extra` adds tables (e.g. [attachments]).
  void start(
    const std::string& runtime, const std::string& extra = "",
    const std::string& mode = "mode = \"poll\"\npoll_timeout_s = 1\n") {
    auto cfg = node_head("attachments-test", 5, "request_timeout_ms = 20000\n")
               + "[[butler]]\nname = \"general\"\nsession_timeout_s = 60\n"
                 "[butler.runtime]\n"
               + runtime
               + "[[connector]]\nname = \"bot\"\ntype = \"telegram\"\n"
                 "endpoint_identity = \"butlers_test_bot\"\n"
               + mode + "api_base = \"" + tg.base_url()
               + "\"\n[[messenger.adapter]]\nkind = \"telegram\"\n"
                 "connector = \"bot\"\n"
               + extra;
    ASSERT_TRUE(
      start_node(cfg, {{"BUTLERS_CONNECTOR_BOT_TOKEN", tg.token()},
                       {"BUTLERS_CONNECTOR_BOT_SECRET_TOKEN", webhook_secret},
                       {"BUTLERS_TEST_MODEL_KEY", "sk-test"}}));
  }

  static constexpr const char* webhook_secret = "attach-Secret_1";

  /// POSTs `update` to the bot connector's webhook as Telegram does.
  http_response post_webhook(const std::string& update) {
    return http_->raw("POST /v1/connectors/bot/webhook HTTP/1.1\r\n"
                      "Host: 127.0.0.1\r\nConnection: close\r\n"
                      "Content-Type: application/json\r\n"
                      "X-Telegram-Bot-Api-Secret-Token: "
                      + std::string{webhook_secret} + "\r\nContent-Length: "
                      + std::to_string(update.size()) + "\r\n\r\n" + update);
  }

  std::string claude_runtime() {
    return "kind = \"cli\"\nfamily = \"claude\"\nkill_grace_ms = 300\n"
           "command = [\"env\", "
           + json::quote("FAKE_CLAUDE_INPUT_LOG=" + dir_ + "/inputs.log") + ", "
           + json::quote(BUTLERS_FAKE_CLAUDE) + "]\n";
  }

  std::string openai_runtime() {
    return "kind = \"openai\"\nbase_url = \"" + model.base_url()
           + "\"\nmodel = \"test-model\"\n"
             "api_key_env = \"BUTLERS_TEST_MODEL_KEY\"\ntimeout_s = 30\n";
  }

  /// Pushes a message with a photo (two sizes; the larger is `bytes`) and
  /// no caption.
  void push_photo(const std::string& bytes) {
    tg.push_update(photo_update(bytes));
  }

  /// A message Update with a photo (two sizes; the larger is `bytes`, both
  /// served by the fake's file download) and no caption.
  std::string photo_update(const std::string& bytes) {
    tg.add_file("thumb-" + std::to_string(next_update), "tiny");
    tg.add_file("photo-" + std::to_string(next_update), bytes);
    auto id = next_update++;
    return (R"({"update_id":)" + std::to_string(id)
            + R"(,"message":{"message_id":)" + std::to_string(id)
            + R"(,"from":{"id":)" + std::to_string(chat)
            + R"(,"is_bot":false,"first_name":"P"},"chat":{"id":)"
            + std::to_string(chat)
            + R"(,"type":"private"},"date":1795000000,"photo":[)"
              R"({"file_id":"thumb-)"
            + std::to_string(id)
            + R"(","file_unique_id":"t","width":90,"height":90,"file_size":4},)"
              R"({"file_id":"photo-)"
            + std::to_string(id)
            + R"(","file_unique_id":"p","width":1280,"height":960,"file_size":)"
            + std::to_string(bytes.size()) + "}]}}");
  }

  /// Within 30 s, the claude fake logged `line` (its input log, and the
  /// node's log when it did not).
  ::testing::AssertionResult model_got(const std::string& line) {
    if (eventually(
          [&] {
            return read_file(dir_ + "/inputs.log").find(line)
                   != std::string::npos;
          },
          30s))
      return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure()
           << "not in the model's input: " << line << "\n"
           << read_file(dir_ + "/inputs.log") << node_->log();
  }

  int64_t count(const std::string& sql) {
    pqxx::connection conn{url_};
    pqxx::nontransaction tx{conn};
    return tx.exec1(sql)[0].as<int64_t>();
  }

  /// The stored attachment of hash `sha`: (media_type, size), or empty.
  std::string stored(const std::string& sha) {
    pqxx::connection conn{url_};
    pqxx::nontransaction tx{conn};
    auto r = tx.exec_params("SELECT media_type || ' ' || size_bytes::text "
                            "FROM attachments WHERE sha256 = $1 AND "
                            "octet_length(data) = size_bytes",
                            sha);
    return r.empty() ? std::string{} : r[0][0].as<std::string>();
  }
};

TEST_F(Attachments, APhotoWithoutCaptionReachesClaudeAsAnImageBlock) {
  start(claude_runtime());
  auto bytes = random_bytes(150 * 1024);
  auto sha = attachment_hash(bytes);
  push_photo(bytes);
  auto expected = "[image image/jpeg sha256=" + sha
                  + " bytes=" + std::to_string(bytes.size()) + "]";
  ASSERT_TRUE(model_got(expected));
  // The larger size was fetched, once, and stored once.
  EXPECT_EQ(tg.downloads(), 1u);
  EXPECT_EQ(stored(sha), "image/jpeg " + std::to_string(bytes.size()));
  EXPECT_EQ(count("SELECT count(*) FROM message_inbox WHERE raw_payload "
                  "LIKE '%\"attachments\":[{\"sha256\":\""
                  + sha + "\"%'"),
            1);
  // The answer goes back to the chat.
  EXPECT_TRUE(eventually(
    [&] {
      return !tg.messages_to(chat).empty();
    },
    30s))
    << node_->log();
}

TEST_F(Attachments, APhotoWithoutCaptionReachesAnOpenAIModelAsAnImageUrl) {
  start(openai_runtime());
  auto bytes = random_bytes(64 * 1024);
  auto sha = attachment_hash(bytes);
  push_photo(bytes);
  auto expected = "image_url image/jpeg sha256=" + sha
                  + " bytes=" + std::to_string(bytes.size());
  ASSERT_TRUE(eventually(
    [&] {
      for (auto& c : model.calls())
        for (auto& f : c.files)
          if (f == expected)
            return true;
      return false;
    },
    30s))
    << node_->log();
  auto calls = model.calls();
  ASSERT_FALSE(calls.empty());
  // The data URL carries the bytes as they were sent.
  EXPECT_NE(calls[0].body.find("\"url\":\"data:image/jpeg;base64,"
                               + base64_encode(bytes) + "\""),
            std::string::npos);
  EXPECT_TRUE(eventually(
    [&] {
      return !tg.messages_to(chat).empty();
    },
    30s))
    << node_->log();
}

TEST_F(Attachments, InWebhookModeAPhotoReachesClaudeAndOneOverTheCapIsRefused) {
  start(claude_runtime(), "[attachments]\nmax_bytes = 100000\n",
        "mode = \"webhook\"\n");
  auto bytes = random_bytes(60 * 1024);
  auto sha = attachment_hash(bytes);
  // Telegram's POST is answered once the message and its photo are stored.
  auto update = photo_update(bytes);
  auto r = post_webhook(update);
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_NE(r.body.find("accepted"), std::string::npos) << r.body;
  EXPECT_EQ(stored(sha), "image/jpeg " + std::to_string(bytes.size()));
  auto expected = "[image image/jpeg sha256=" + sha
                  + " bytes=" + std::to_string(bytes.size()) + "]";
  ASSERT_TRUE(model_got(expected));
  // Telegram sends the same Update again: the same request, the bytes
  // stored once.
  auto again = post_webhook(update);
  ASSERT_EQ(again.status, 200) << again.body;
  EXPECT_NE(again.body.find("deduped"), std::string::npos) << again.body;
  EXPECT_EQ(count("SELECT count(*) FROM attachments"), 1);
  EXPECT_EQ(count("SELECT count(*) FROM message_inbox"), 1);
  // Over the cap: refused before any download, the person told why.
  auto big = random_bytes(150 * 1024);
  auto refused = post_webhook(photo_update(big));
  ASSERT_EQ(refused.status, 200) << refused.body;
  EXPECT_NE(refused.body.find("refused"), std::string::npos) << refused.body;
  EXPECT_EQ(stored(attachment_hash(big)), "");
  EXPECT_TRUE(eventually(
    [&] {
      for (auto& m : tg.messages_to(chat))
        if (m.text.find("is 150 KB; the limit is 97 KB") != std::string::npos)
          return true;
      return false;
    },
    30s))
    << node_->log();
}

TEST_F(Attachments, AFileOverTheCapIsRefusedWithAMessageAndLeavesNothing) {
  auto before = entries_with("/tmp", "butlers-attachments-");
  start(openai_runtime(),
        "[attachments]\nmax_bytes = 100000\nmax_message_bytes = 100000\n");
  auto bytes = random_bytes(150000);
  auto sha = attachment_hash(bytes);
  tg.add_file("doc-big", bytes);
  auto id = next_update++;
  tg.push_update(R"({"update_id":)" + std::to_string(id)
                 + R"(,"message":{"message_id":)" + std::to_string(id)
                 + R"(,"from":{"id":)" + std::to_string(chat)
                 + R"(,"is_bot":false,"first_name":"P"},"chat":{"id":)"
                 + std::to_string(chat)
                 + R"(,"type":"private"},"date":1795000000,)"
                   R"("document":{"file_id":"doc-big","file_name":)"
                   R"("scan.pdf","mime_type":"application/pdf",)"
                   R"("file_size":150000}}})");
  ASSERT_TRUE(eventually(
    [&] {
      for (auto& m : tg.messages_to(chat))
        if (m.text.find("not taken") != std::string::npos)
          return true;
      return false;
    },
    30s))
    << node_->log();
  std::string refusal;
  for (auto& m : tg.messages_to(chat))
    if (m.text.find("not taken") != std::string::npos)
      refusal = m.text;
  EXPECT_NE(refusal.find("'scan.pdf' is 146 KB; the limit is 97 KB"),
            std::string::npos)
    << refusal;
  ASSERT_TRUE(eventually(
    [&] {
      return http_->get("/metrics")
               .body.find(
                 "butlers_connector_attachments_refused_total{connector="
                 "\"bot\"} 1")
             != std::string::npos;
    },
    10s));
  // The update is confirmed, and the refused document left nothing: no
  // row of its bytes, no inbox row, no getFile, no download.
  ASSERT_TRUE(eventually(
    [&] {
      return tg.pending_updates() == 0;
    },
    15s));
  EXPECT_EQ(stored(sha), "");
  EXPECT_EQ(count("SELECT count(*) FROM attachments"), 0);
  EXPECT_EQ(count("SELECT count(*) FROM message_inbox"), 0);
  EXPECT_EQ(tg.count("getFile"), 0u);
  EXPECT_EQ(tg.downloads(), 0u);
  EXPECT_EQ(model.call_count(), 0u);
  // No session directory and no file of the node's own were left behind.
  EXPECT_EQ(entries_with("/tmp", "butlers-attachments-"), before);
  EXPECT_EQ(entries_with(dir_, "attachment"), 0u);
}

// -- the thread API -----------------------------------------------------------

class ThreadAttachments : public Attachments {
 protected:
  /// A node without connectors: `general` runs `runtime`.
  void start_threads(const std::string& runtime,
                     const std::string& extra = "") {
    auto cfg = node_head("attachments-threads", 5,
                         "request_timeout_ms = 20000\n"
                         "max_body_bytes = 4194304\n")
               + "[[butler]]\nname = \"general\"\nsession_timeout_s = 60\n"
                 "[butler.runtime]\n"
               + runtime + extra;
    ASSERT_TRUE(start_node(cfg));
  }

  http_response turn(const std::string& thread, const std::string& files) {
    return http_->post("/v1/threads/" + thread + "/turns",
                       R"({"message_id":"m1","text":"what is this?",)"
                       R"("butler":"general","attachments":)"
                         + files + "}");
  }

  static std::string file(const std::string& name, const std::string& type,
                          const std::string& bytes) {
    return R"({"name":)" + json::quote(name) + R"(,"media_type":)"
           + json::quote(type) + R"(,"data":")" + base64_encode(bytes) + "\"}";
  }
};

TEST_F(ThreadAttachments, ATurnsImageReachesClaudeAsAnImageBlock) {
  start_threads(claude_runtime());
  auto bytes = random_bytes(40 * 1024);
  auto r = turn("t-img", "[" + file("p.png", "image/png", bytes) + "]");
  ASSERT_EQ(r.status, 200) << r.body;
  auto expected = "[image image/png sha256=" + attachment_hash(bytes)
                  + " bytes=" + std::to_string(bytes.size()) + "]";
  ASSERT_TRUE(model_got(expected));
  EXPECT_NE(read_file(dir_ + "/inputs.log").find("what is this?"),
            std::string::npos);
}

TEST_F(ThreadAttachments, ACliRuntimeGetsFilesThatAreRemovedAfterwards) {
  // A one-shot CLI (plain text out, prompt on stdin) that records the
  // attachment files its prompt lists, with their hashes.
  auto script = dir_ + "/cli.sh";
  {
    std::ofstream f{script};
    f << "p=$(cat)\n"
         "printf '%s\\n' \"$p\" | sed -n 's/^- \\(\\/[^ ]*\\) (.*/\\1/p' |\n"
         "  while read -r f; do\n"
         "    printf '%s %s\\n' \"$f\" \"$(sha256sum < \"$f\" | cut -c1-64)\""
         " >> "
      << dir_ << "/files.log\n  done\necho seen\n";
  }
  start_threads("kind = \"cli\"\nfamily = \"opencode\"\ncommand = [\"sh\", "
                + json::quote(script) + "]\n");
  auto bytes = random_bytes(3000);
  auto r = turn("t-cli",
                "[" + file("scan.pdf", "application/pdf", bytes) + "]");
  ASSERT_EQ(r.status, 200) << r.body;
  std::string log;
  ASSERT_TRUE(eventually(
    [&] {
      log = read_file(dir_ + "/files.log");
      return !log.empty();
    },
    30s))
    << node_->log();
  // "/tmp/butlers-attachments-XXXXXX/1-scan.pdf <sha256>"
  auto space = log.find(' ');
  ASSERT_NE(space, std::string::npos) << log;
  auto path = log.substr(0, space);
  EXPECT_EQ(path.rfind("/tmp/butlers-attachments-", 0), 0u) << path;
  EXPECT_NE(path.find("/1-scan.pdf"), std::string::npos) << path;
  EXPECT_EQ(log.substr(space + 1, 64), attachment_hash(bytes)) << log;
  // Gone with the session.
  auto dir = path.substr(0, path.rfind('/'));
  EXPECT_TRUE(eventually(
    [&] {
      struct stat st {};
      return ::stat(dir.c_str(), &st) != 0;
    },
    15s))
    << dir;
}

TEST_F(ThreadAttachments, AQueuedTurnsFilesReachTheModelAfterARestart) {
  // The first run's model takes a minute; the turn queued behind it carries
  // an image. The node restarts before the queued run starts.
  auto runtime = [&](const std::string& delay_ms) {
    return "kind = \"cli\"\nfamily = \"claude\"\nkill_grace_ms = 300\n"
           "command = [\"env\", "
           + json::quote("FAKE_CLAUDE_INPUT_LOG=" + dir_ + "/inputs.log") + ", "
           + json::quote("FAKE_CLAUDE_TURN_DELAY_MS=" + delay_ms) + ", "
           + json::quote(BUTLERS_FAKE_CLAUDE) + "]\n";
  };
  start_threads(runtime("60000"));
  auto first = http_->post("/v1/threads/t-queue/turns",
                           R"({"message_id":"m1","text":"a long one",)"
                           R"("butler":"general"})");
  ASSERT_EQ(first.status, 200) << first.body;
  auto bytes = random_bytes(20 * 1024);
  auto queued
    = http_->post("/v1/threads/t-queue/turns",
                  R"({"message_id":"m2","text":"and this?","butler":"general",)"
                  R"("mode":"queue","attachments":[)"
                    + file("q.png", "image/png", bytes) + "]}");
  ASSERT_EQ(queued.status, 200) << queued.body;
  EXPECT_NE(queued.body.find(R"("kind":"queued")"), std::string::npos)
    << queued.body;
  ASSERT_TRUE(stop_node());
  start_threads(runtime("0"));
  // The first run is resumed, then the queued one starts with its image.
  auto expected = "[image image/png sha256=" + attachment_hash(bytes)
                  + " bytes=" + std::to_string(bytes.size()) + "]";
  ASSERT_TRUE(model_got(expected));
  EXPECT_NE(read_file(dir_ + "/inputs.log").find("and this?"),
            std::string::npos);
}

TEST_F(ThreadAttachments, ATurnOverTheCapIs413AndStoresNothing) {
  start_threads(claude_runtime(), "[attachments]\nmax_bytes = 10000\n");
  auto r = turn("t-big",
                "[" + file("a.png", "image/png", random_bytes(200)) + ","
                  + file("b.png", "image/png", random_bytes(20000)) + "]");
  EXPECT_EQ(r.status, 413) << r.body;
  EXPECT_NE(r.body.find("'b.png' is 19 KB; the limit is 9 KB"),
            std::string::npos)
    << r.body;
  auto bad = turn("t-bad", R"([{"name":"x","media_type":"image/png",)"
                           R"("data":"not base64!"}])");
  EXPECT_EQ(bad.status, 400) << bad.body;
  EXPECT_NE(bad.body.find("attachments[0].data"), std::string::npos)
    << bad.body;
  EXPECT_EQ(count("SELECT count(*) FROM attachments"), 0);
  EXPECT_EQ(count("SELECT count(*) FROM thread_transcript"), 0);
  EXPECT_NE(http_->get("/metrics")
              .body.find("butlers_thread_attachments_refused_total 1"),
            std::string::npos);
}

// -- mail -----------------------------------------------------------------

class MailAttachments : public Attachments {
 protected:
  /// A node whose `general` butler runs the claude fake, fed by a Maildir.
  void start_mail(const std::string& extra = "") {
    box_ = dir_ + "/Maildir";
    auto cfg = node_head("attachments-mail", 5, "request_timeout_ms = 20000\n")
               + "[[butler]]\nname = \"general\"\nsession_timeout_s = 60\n"
                 "[butler.runtime]\n"
               + claude_runtime()
               + "[[messenger.adapter]]\nkind = \"outbox\"\npath = \"" + dir_
               + "/outbox.jsonl\"\n"
                 "[[connector]]\nname = \"mail\"\ntype = \"maildir\"\n"
                 "path = \""
               + box_
               + "\"\nendpoint_identity = \"butlers@example.net\"\n"
                 "poll_ms = 50\n"
               + extra;
    ASSERT_TRUE(start_node(cfg));
  }

  /// Writes a mail with a text body and `files` ((name, type, bytes)) to
  /// new/, as a delivery agent does.
  void deliver(
    const std::string& name,
    const std::vector<std::tuple<std::string, std::string, std::string>>&
      files) {
    std::string m = "Message-ID: <" + name
                    + "@mail.example.org>\nFrom: Pat <pat@example.org>\n"
                      "To: butlers@example.net\nSubject: A scan\n"
                      "MIME-Version: 1.0\n"
                      "Content-Type: multipart/mixed; boundary=\"b\"\n\n"
                      "--b\nContent-Type: text/plain\n\nWhat is this?\n";
    for (auto& [file, type, bytes] : files)
      m += "--b\nContent-Type: " + type
           + "\nContent-Disposition: attachment; filename=\"" + file
           + "\"\nContent-Transfer-Encoding: base64\n\n" + base64_encode(bytes)
           + "\n";
    m += "--b--\n";
    for (auto sub : {"/tmp", "/new", "/cur"})
      ::mkdir((box_ + sub).c_str(), 0755);
    write_file(box_ + "/tmp/" + name, m);
    ASSERT_EQ(::rename((box_ + "/tmp/" + name).c_str(),
                       (box_ + "/new/" + name).c_str()),
              0);
  }

  std::string box_;
};

TEST_F(MailAttachments, AMailsImageReachesClaudeAndAFileOverTheCapIsNamed) {
  start_mail("[attachments]\nmax_bytes = 100000\n");
  auto image = random_bytes(30 * 1024);
  auto big = random_bytes(150 * 1024);
  deliver("1.mail.host", {{"photo.png", "image/png", image},
                          {"scan.pdf", "application/pdf", big}});
  auto expected = "[image image/png sha256=" + attachment_hash(image)
                  + " bytes=" + std::to_string(image.size()) + "]";
  ASSERT_TRUE(model_got(expected));
  // The image is stored once; the PDF over the cap is not, and the text
  // the model got says so.
  EXPECT_EQ(stored(attachment_hash(image)),
            "image/png " + std::to_string(image.size()));
  EXPECT_EQ(stored(attachment_hash(big)), "");
  EXPECT_EQ(count("SELECT count(*) FROM attachments"), 1);
  EXPECT_NE(read_file(dir_ + "/inputs.log")
              .find("[scan.pdf (application/pdf) not taken: 'scan.pdf' is "
                    "150 KB; the limit is 97 KB per attachment]"),
            std::string::npos)
    << read_file(dir_ + "/inputs.log");
  // The mail ends in cur/ once its request is stored.
  EXPECT_TRUE(eventually(
    [&] {
      return entries_with(box_ + "/cur", "1.mail.host") == 1;
    },
    10s));
}

} // namespace
} // namespace butlers::test
