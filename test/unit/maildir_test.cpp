#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <numeric>
#include <set>
#include <sstream>
#include <thread>

#include <gtest/gtest.h>

#include "runtime/attachments.hpp"
#include "runtime/ingest.hpp"
#include "runtime/mail.hpp"
#include "runtime/maildir.hpp"
#include "runtime/maildir_source.hpp"
#include "test/support/fake_connector_sink.hpp"
#include "test/support/poll.hpp"
#include "test/support/temp_dir.hpp"

namespace butlers {
namespace {

namespace fs = std::filesystem;

using butlers::test::temp_dir;

std::string fixture(const std::string& name) {
  std::ifstream in{BUTLERS_SOURCE_DIR "/test/fixtures/mail/" + name,
                   std::ios::binary};
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

std::string slurp(const fs::path& p) {
  std::ifstream in{p, std::ios::binary};
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

void write(const fs::path& p, const std::string& bytes) {
  std::ofstream out{p, std::ios::binary};
  out << bytes;
}

/// Delivers as Maildir writers do: written in tmp/, then renamed into new/,
/// so a poller never sees a half-written file.
void deliver(const fs::path& box, const std::string& name,
             const std::string& bytes) {
  write(box / "tmp" / name, bytes);
  fs::rename(box / "tmp" / name, box / "new" / name);
}

std::vector<std::string> names_in(const fs::path& dir) {
  std::vector<std::string> out;
  for (auto& e : fs::directory_iterator{dir})
    out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

// -- maildir ------------------------------------------------------------------

TEST(Maildir, PrepareCreatesTheSubdirectories) {
  temp_dir tmp;
  maildir md{tmp.str() + "/box/"};
  EXPECT_EQ(md.path(), tmp.str() + "/box");
  EXPECT_EQ(md.prepare(), "");
  for (auto sub : {"new", "cur", "tmp", "quarantine"})
    EXPECT_TRUE(fs::is_directory(tmp.path() / "box" / sub)) << sub;
  EXPECT_EQ(md.prepare(), "") << "again: nothing to do";
  write(tmp.path() / "file", "x");
  maildir not_a_dir{tmp.str() + "/file"};
  EXPECT_NE(not_a_dir.prepare(), "");
}

TEST(Maildir, NewIsListedOldestFirstBoundedWithoutTmpDotFilesOrDirs) {
  temp_dir tmp;
  maildir md{tmp.str()};
  ASSERT_EQ(md.prepare(), "");
  auto nw = tmp.path() / "new";
  write(nw / "1700000002.M2P1.host", "b");
  write(nw / "1700000001.M9P1.host", "a");
  write(nw / "999999999.M1P1.host", "older: fewer digits");
  write(nw / "1700000001.M1P1.host", "a2");
  write(nw / "no-time-here", "z");
  write(nw / ".hidden", "h");
  fs::create_directory(nw / "adir");
  write(tmp.path() / "tmp" / "1600000000.M1P1.host", "being written");
  EXPECT_EQ(md.list_new(10),
            (std::vector<std::string>{"999999999.M1P1.host",
                                      "1700000001.M1P1.host",
                                      "1700000001.M9P1.host",
                                      "1700000002.M2P1.host", "no-time-here"}));
  EXPECT_EQ(md.list_new(2), (std::vector<std::string>{"999999999.M1P1.host",
                                                      "1700000001.M1P1.host"}));
  auto skip = [](const std::string& n) {
    return n == "999999999.M1P1.host";
  };
  EXPECT_EQ(md.list_new(1, skip),
            std::vector<std::string>{"1700000001.M1P1.host"});
  std::string error;
  maildir missing{tmp.str() + "/nope"};
  EXPECT_TRUE(missing.list_new(10, {}, &error).empty());
  EXPECT_NE(error.find("/nope/new"), std::string::npos) << error;
}

TEST(Maildir, ReadGivesTheBytesOrSaysWhyNot) {
  temp_dir tmp;
  maildir md{tmp.str(), 10};
  ASSERT_EQ(md.prepare(), "");
  write(tmp.path() / "new" / "small", "0123456789");
  write(tmp.path() / "new" / "big", "0123456789X");
  auto f = md.read("small");
  ASSERT_TRUE(f.bytes.has_value());
  EXPECT_EQ(*f.bytes, "0123456789");
  auto big = md.read("big");
  EXPECT_FALSE(big.bytes.has_value());
  EXPECT_NE(big.error.find("11 bytes, more than the 10"), std::string::npos)
    << big.error;
  auto gone = md.read("gone");
  EXPECT_TRUE(gone.vanished);
  EXPECT_EQ(gone.error, "");
}

TEST(Maildir, SeenAddsTheSFlagInOrder) {
  EXPECT_EQ(maildir::seen_name("1.M1.host"), "1.M1.host:2,S");
  EXPECT_EQ(maildir::seen_name("1.M1.host:2,"), "1.M1.host:2,S");
  EXPECT_EQ(maildir::seen_name("1.M1.host:2,RT"), "1.M1.host:2,RST");
  EXPECT_EQ(maildir::seen_name("1.M1.host:2,FS"), "1.M1.host:2,FS");
}

TEST(Maildir, MarkSeenMovesToCur) {
  temp_dir tmp;
  maildir md{tmp.str()};
  ASSERT_EQ(md.prepare(), "");
  write(tmp.path() / "new" / "1.M1.host", "mail");
  EXPECT_EQ(md.mark_seen("1.M1.host"), "");
  EXPECT_TRUE(names_in(tmp.path() / "new").empty());
  EXPECT_EQ(names_in(tmp.path() / "cur"),
            std::vector<std::string>{"1.M1.host:2,S"});
  EXPECT_EQ(slurp(tmp.path() / "cur" / "1.M1.host:2,S"), "mail");
  EXPECT_NE(md.mark_seen("1.M1.host"), "") << "nothing left to move";
}

TEST(Maildir, QuarantineKeepsTheFileAndItsReason) {
  temp_dir tmp;
  maildir md{tmp.str()};
  ASSERT_EQ(md.prepare(), "");
  fs::remove(tmp.path() / "quarantine");
  write(tmp.path() / "new" / "bad", "garbage");
  EXPECT_EQ(md.quarantine("bad", "no From mailbox"), "");
  EXPECT_EQ(names_in(tmp.path() / "quarantine"),
            (std::vector<std::string>{"bad", "bad.reason"}));
  EXPECT_EQ(slurp(tmp.path() / "quarantine" / "bad"), "garbage");
  EXPECT_EQ(slurp(tmp.path() / "quarantine" / "bad.reason"),
            "no From mailbox\n");
}

// -- maildir_poller -----------------------------------------------------------

/// The canonical ingest path in memory: validates with parse_ingest and
/// dedupes by key, or answers what the test scripts.
struct fake_ingest {
  std::map<std::string, std::string> by_key; // dedupe key -> envelope
  std::vector<std::string> envelopes;        // every submission
  std::vector<size_t> groups;                // envelopes per call
  std::optional<mail_submit> forced;

  mail_submit_result one(const std::string& envelope) {
    envelopes.push_back(envelope);
    if (forced)
      return {*forced, "scripted"};
    auto r = parse_ingest(envelope, 1 << 20, 300, 1700000000000000);
    if (!r.record)
      return {mail_submit::invalid, "invalid"};
    by_key.emplace(r.record->dedupe_key, envelope);
    return {mail_submit::stored, r.record->dedupe_key};
  }

  std::vector<mail_submit_result> operator()(
    const std::vector<std::string>& batch) {
    groups.push_back(batch.size());
    std::vector<mail_submit_result> out;
    for (auto& e : batch)
      out.push_back(one(e));
    return out;
  }
};

class MaildirPoller : public testing::Test {
 protected:
  MaildirPoller() {
    EXPECT_EQ(maildir{tmp.str()}.prepare(), "");
  }

  maildir_poller make(size_t in_flight = 1) {
    return maildir_poller{maildir{tmp.str()},
                          "inbox@example.net",
                          in_flight,
                          [this](const std::vector<std::string>& e) {
                            return ingest(e);
                          },
                          register_maildir_metrics(reg, "mail"),
                          [] {
                            return int64_t{1700000000000000};
                          }};
  }

  void drop(const std::string& name, const std::string& fixture_name) {
    write(tmp.path() / "new" / name, fixture(fixture_name));
  }

  std::vector<std::string> in(const char* sub) {
    return names_in(tmp.path() / sub);
  }

  uint64_t count(const char* outcome) {
    return reg
      .get_counter("butlers_connector_maildir_files_total", "",
                   std::string{"connector=\"mail\",outcome=\""} + outcome
                     + "\"")
      .value();
  }

  temp_dir tmp;
  metrics_registry reg;
  fake_ingest ingest;
};

TEST_F(MaildirPoller, EachMailIsSubmittedThenMovedToCur) {
  drop("1.A.host", "multipart_alternative.eml");
  drop("2.B.host", "reply_with_references.eml");
  auto poller = make();
  auto r = poller.poll_once(10);
  EXPECT_EQ(r.listed, 2u);
  EXPECT_EQ(r.seen, 2u);
  EXPECT_EQ(r.error, "");
  EXPECT_TRUE(in("new").empty());
  EXPECT_EQ(in("cur"),
            (std::vector<std::string>{"1.A.host:2,S", "2.B.host:2,S"}));
  ASSERT_EQ(ingest.envelopes.size(), 2u);
  EXPECT_NE(ingest.envelopes[0].find(
              R"("endpoint_identity":"inbox@example.net")"),
            std::string::npos);
  EXPECT_NE(ingest.envelopes[0].find("alt-1@mail.example.org"),
            std::string::npos)
    << "oldest first";
  EXPECT_EQ(count("submitted"), 2u);
  EXPECT_EQ(count("seen"), 2u);
  EXPECT_EQ(poller.poll_once(10).listed, 0u) << "nothing left";
}

TEST_F(MaildirPoller, ADuplicateIsMovedToCurToo) {
  drop("1.A.host", "no_message_id.eml");
  auto poller = make();
  poller.poll_once(10);
  // The same file again (a fetcher that delivered it twice, or a crash
  // after the commit and before the move): the content hash dedupes it.
  drop("2.A.host", "no_message_id.eml");
  auto r = poller.poll_once(10);
  EXPECT_EQ(r.seen, 1u);
  EXPECT_EQ(ingest.by_key.size(), 1u);
  EXPECT_EQ(ingest.envelopes.size(), 2u);
  EXPECT_EQ(in("cur"),
            (std::vector<std::string>{"1.A.host:2,S", "2.A.host:2,S"}));
}

TEST_F(MaildirPoller, MalformedMailIsQuarantinedWithoutASubmission) {
  drop("1.bad.host", "malformed_garbage.eml");
  drop("2.nofrom.host", "malformed_no_from.eml");
  drop("3.good.host", "base64.eml");
  auto poller = make();
  auto r = poller.poll_once(10);
  EXPECT_EQ(r.quarantined, 2u);
  EXPECT_EQ(r.unreadable, 2u);
  EXPECT_EQ(r.seen, 1u);
  EXPECT_EQ(ingest.envelopes.size(), 1u);
  EXPECT_EQ(in("quarantine"),
            (std::vector<std::string>{"1.bad.host", "1.bad.host.reason",
                                      "2.nofrom.host",
                                      "2.nofrom.host.reason"}));
  EXPECT_EQ(slurp(tmp.path() / "quarantine" / "2.nofrom.host.reason"),
            "not a usable mail: no From mailbox\n");
  EXPECT_EQ(slurp(tmp.path() / "quarantine" / "1.bad.host"),
            fixture("malformed_garbage.eml"))
    << "kept as it was";
  EXPECT_EQ(count("quarantined"), 2u);
  EXPECT_EQ(in("cur"), std::vector<std::string>{"3.good.host:2,S"});
}

TEST_F(MaildirPoller, ARejectedEnvelopeIsQuarantined) {
  drop("1.A.host", "base64.eml");
  ingest.forced = mail_submit::invalid;
  auto poller = make();
  auto r = poller.poll_once(10);
  EXPECT_EQ(r.quarantined, 1u);
  EXPECT_EQ(r.unreadable, 0u) << "submitted, and counted by the sink";
  EXPECT_EQ(slurp(tmp.path() / "quarantine" / "1.A.host.reason"),
            "ingest refused it: scripted\n");
}

TEST_F(MaildirPoller, UnavailableLeavesTheBatchInNewForTheNextPass) {
  drop("1.A.host", "base64.eml");
  drop("2.B.host", "iso_8859_1.eml");
  ingest.forced = mail_submit::later;
  auto poller = make();
  auto r = poller.poll_once(10);
  EXPECT_EQ(r.deferred, 1u);
  EXPECT_EQ(ingest.envelopes.size(), 1u) << "the rest of the batch waits";
  EXPECT_EQ(in("new").size(), 2u);
  EXPECT_EQ(count("deferred"), 1u);
  ingest.forced.reset();
  r = poller.poll_once(10);
  EXPECT_EQ(r.seen, 2u);
  EXPECT_TRUE(in("new").empty());
}

TEST_F(MaildirPoller, TheBatchBoundsOnePass) {
  for (int i = 0; i < 5; ++i)
    write(tmp.path() / "new" / (std::to_string(i) + ".M.host"),
          "From: a" + std::to_string(i) + "@example.org\nMessage-ID: <"
            + std::to_string(i) + "@x>\n\nhi\n");
  auto poller = make();
  EXPECT_EQ(poller.poll_once(2).seen, 2u);
  EXPECT_EQ(in("new").size(), 3u);
  EXPECT_EQ(poller.poll_once(2).seen, 2u);
  EXPECT_EQ(poller.poll_once(2).seen, 1u);
  EXPECT_EQ(ingest.by_key.size(), 5u);
}

TEST_F(MaildirPoller, MailsGoInGroupsOfTheInFlightLimitInOrder) {
  for (int i = 0; i < 7; ++i)
    write(tmp.path() / "new" / (std::to_string(i) + ".M.host"),
          "From: a@example.org\nMessage-ID: <" + std::to_string(i)
            + "@x>\n\nhi\n");
  drop("3.bad.host", "malformed_garbage.eml"); // quarantined, not submitted
  auto poller = make(3);
  auto r = poller.poll_once(100);
  EXPECT_EQ(r.seen, 7u);
  EXPECT_EQ(r.unreadable, 1u);
  EXPECT_EQ(ingest.groups, (std::vector<size_t>{3, 2, 2}));
  ASSERT_EQ(ingest.envelopes.size(), 7u);
  for (size_t i = 0; i < 7; ++i)
    EXPECT_NE(ingest.envelopes[i].find("\"" + std::to_string(i) + "@x\""),
              std::string::npos)
      << i;
}

TEST_F(MaildirPoller, ALaterInAGroupEndsThePassAfterSettlingTheGroup) {
  for (int i = 0; i < 6; ++i)
    write(tmp.path() / "new" / (std::to_string(i) + ".M.host"),
          "From: a@example.org\nMessage-ID: <" + std::to_string(i)
            + "@x>\n\nhi\n");
  auto poller = maildir_poller{maildir{tmp.str()},
                               "inbox@example.net",
                               3,
                               [&](const std::vector<std::string>& batch) {
                                 // The in-flight limit was reached: the third
                                 // comes back refused.
                                 auto out = ingest(batch);
                                 out.back() = {mail_submit::later, "refused"};
                                 return out;
                               },
                               register_maildir_metrics(reg, "mail"),
                               [] {
                                 return int64_t{1700000000000000};
                               }};
  auto r = poller.poll_once(100);
  EXPECT_EQ(r.seen, 2u);
  EXPECT_EQ(r.deferred, 1u);
  EXPECT_EQ(ingest.groups, std::vector<size_t>{3}) << "no second group";
  EXPECT_EQ(in("new").size(), 4u);
}

TEST_F(MaildirPoller, AFileThatCannotBeMovedIsSkippedNotRetriedForever) {
  drop("1.A.host", "base64.eml");
  // cur/ and quarantine/ are files: every rename out of new/ fails (root
  // ignores permission bits, so a read-only directory would not do).
  fs::remove(tmp.path() / "cur");
  write(tmp.path() / "cur", "");
  fs::remove(tmp.path() / "quarantine");
  write(tmp.path() / "quarantine", "");
  drop("2.bad.host", "malformed_garbage.eml");
  auto poller = make();
  auto r = poller.poll_once(10);
  EXPECT_EQ(r.stuck, 2u);
  EXPECT_EQ(count("stuck"), 2u);
  EXPECT_EQ(ingest.envelopes.size(), 1u);
  r = poller.poll_once(10);
  EXPECT_EQ(r.listed, 0u) << "skipped from now on";
  EXPECT_EQ(ingest.envelopes.size(), 1u);
  EXPECT_EQ(in("new").size(), 2u) << "and never lost";
}

TEST_F(MaildirPoller, StopEndsThePassBetweenFiles) {
  drop("1.A.host", "base64.eml");
  drop("2.B.host", "iso_8859_1.eml");
  std::atomic<bool> stop{false};
  auto poller = maildir_poller{maildir{tmp.str()},
                               "inbox@example.net",
                               1,
                               [&](const std::vector<std::string>& e) {
                                 stop = true;
                                 return ingest(e);
                               },
                               register_maildir_metrics(reg, "mail"),
                               [] {
                                 return int64_t{1700000000000000};
                               }};
  auto r = poller.poll_once(10, &stop);
  EXPECT_EQ(r.seen, 1u);
  EXPECT_EQ(in("new"), std::vector<std::string>{"2.B.host"});
}

TEST_F(MaildirPoller, AMissingNewDirectoryIsReported) {
  fs::remove_all(tmp.path() / "new");
  auto poller = make();
  auto r = poller.poll_once(10);
  EXPECT_EQ(r.listed, 0u);
  EXPECT_NE(r.error, "");
}

TEST_F(MaildirPoller, AMailTheAnswerHookSettlesIsNeverSubmitted) {
  drop("1.A.host", "multipart_alternative.eml");
  drop("2.B.host", "reply_with_references.eml");
  drop("3.C.host", "base64.eml");
  auto poller = make(4);
  std::vector<std::string> offered;
  std::optional<mail_submit_result> verdict{
    mail_submit_result{mail_submit::stored, "answered"}};
  poller.on_answer([&](const mail_message& m) {
    offered.push_back(m.message_id);
    return m.in_reply_to.empty() ? std::nullopt : verdict;
  });
  auto r = poller.poll_once(10);
  EXPECT_EQ(offered.size(), 3u) << "each parsed mail is offered";
  EXPECT_EQ(r.seen, 3u);
  EXPECT_EQ(in("cur").size(), 3u);
  // The reply was settled by the hook; the other two were submitted.
  EXPECT_EQ(ingest.envelopes.size(), 2u);
  for (auto& e : ingest.envelopes)
    EXPECT_EQ(e.find("r3@mail.example.org"), std::string::npos) << e;
}

TEST_F(MaildirPoller, AnAnswerThatCannotBeDecidedNowStaysInNew) {
  drop("1.B.host", "reply_with_references.eml");
  auto poller = make();
  poller.on_answer([](const mail_message&) {
    return std::optional<mail_submit_result>{
      mail_submit_result{mail_submit::later, "away"}};
  });
  auto r = poller.poll_once(10);
  EXPECT_EQ(r.deferred, 1u);
  EXPECT_EQ(in("new"), std::vector<std::string>{"1.B.host"});
  EXPECT_TRUE(ingest.envelopes.empty());
  EXPECT_EQ(count("deferred"), 1u);
}

// -- the connector source -----------------------------------------------------

/// An attachment store in memory: by hash, or failing when told to.
struct fake_file_store {
  std::map<std::string, std::string> files;
  bool failing = false;

  std::optional<attachment_ref> operator()(const mail_attachment& f,
                                           std::string* error) {
    if (failing) {
      *error = "database unavailable";
      return std::nullopt;
    }
    auto sha = attachment_hash(f.bytes);
    files[sha] = f.bytes;
    return attachment_ref{sha, f.media_type, f.bytes.size(), f.name};
  }
};

TEST_F(MaildirPoller, AMailsFilesAreStoredAndNamedInItsEnvelope) {
  drop("1.A.host", "nested_multipart.eml");
  auto poller = make();
  auto store = std::make_shared<fake_file_store>();
  poller.on_files(
    [store](const mail_attachment& f, std::string* e) {
      return (*store)(f, e);
    },
    attachment_limits{});
  EXPECT_EQ(poller.poll_once(10).seen, 1u);
  ASSERT_EQ(store->files.size(), 2u);
  ASSERT_EQ(ingest.envelopes.size(), 1u);
  auto& env = ingest.envelopes[0];
  auto png = attachment_hash(std::string("\x89PNG\r\n\x1a\n", 8));
  EXPECT_NE(env.find(R"("attachments":[{"sha256":")" + png
                     + R"(","media_type":"image/png","size":8,)"
                       R"("name":"attachment-1"})"),
            std::string::npos)
    << env;
  EXPECT_NE(env.find(R"("name":"notes.txt")"), std::string::npos) << env;
  EXPECT_EQ(env.find("not taken"), std::string::npos);
}

TEST_F(MaildirPoller, AFileOverACapIsLeftOutAndNamedInTheText) {
  drop("1.A.host", "nested_multipart.eml");
  auto poller = make();
  auto store = std::make_shared<fake_file_store>();
  attachment_limits caps;
  caps.max_bytes = 10; // the 8-byte image fits, the 29-byte notes do not
  poller.on_files(
    [store](const mail_attachment& f, std::string* e) {
      return (*store)(f, e);
    },
    caps);
  EXPECT_EQ(poller.poll_once(10).seen, 1u);
  EXPECT_EQ(store->files.size(), 1u);
  ASSERT_EQ(ingest.envelopes.size(), 1u);
  auto& env = ingest.envelopes[0];
  EXPECT_NE(env.find(R"("name":"attachment-1")"), std::string::npos) << env;
  EXPECT_EQ(env.find(R"("name":"notes.txt")"), std::string::npos) << env;
  EXPECT_NE(env.find("[notes.txt (text/plain) not taken: 'notes.txt' is 29 "),
            std::string::npos)
    << env;
}

TEST_F(MaildirPoller, AFailedFileStoreLeavesTheMailInNewForALaterPass) {
  drop("1.A.host", "nested_multipart.eml");
  auto poller = make();
  auto store = std::make_shared<fake_file_store>();
  store->failing = true;
  poller.on_files(
    [store](const mail_attachment& f, std::string* e) {
      return (*store)(f, e);
    },
    attachment_limits{});
  auto r = poller.poll_once(10);
  EXPECT_EQ(r.deferred, 1u);
  EXPECT_TRUE(ingest.envelopes.empty()) << "nothing submitted";
  EXPECT_EQ(in("new"), std::vector<std::string>{"1.A.host"});
  store->failing = false;
  EXPECT_EQ(poller.poll_once(10).seen, 1u) << "the next pass takes it";
  EXPECT_EQ(store->files.size(), 2u);
}

TEST(MaildirSource, TheIngestAnswerMapsOntoTheVerdict) {
  auto v = [](submit_status s) {
    submit_outcome o;
    o.status = s;
    return mail_verdict(o).verdict;
  };
  EXPECT_EQ(v(submit_status::accepted), mail_submit::stored);
  EXPECT_EQ(v(submit_status::deduped), mail_submit::stored);
  EXPECT_EQ(v(submit_status::invalid), mail_submit::invalid);
  EXPECT_EQ(v(submit_status::unavailable), mail_submit::later);
  EXPECT_EQ(v(submit_status::refused), mail_submit::later);
  // A sender over its rate limit: kept in quarantine/, the sender told.
  EXPECT_EQ(v(submit_status::rate_limited), mail_submit::invalid);
}

TEST(MaildirSource, PollsNewUntilStoppedAndCountsWhatItCannotRead) {
  temp_dir tmp;
  auto box = tmp.path() / "box";
  connector_config cfg;
  cfg.name = "mail";
  cfg.type = connector_type::maildir;
  cfg.path = box.string();
  cfg.endpoint_identity = "inbox@example.net";
  cfg.poll_ms = 20;
  metrics_registry reg;
  maildir_source source{cfg, register_maildir_metrics(reg, "mail")};
  test::fake_connector_sink sink;
  std::thread runner{[&] {
    source.run(sink);
  }};
  // The source made the directories; mails arrive while it polls.
  ASSERT_TRUE(test::eventually(
    [&] {
      return fs::is_directory(box / "tmp");
    },
    std::chrono::seconds{10}));
  for (int i = 0; i < 70; ++i) // more than one pass takes
    deliver(box, std::to_string(1000 + i) + ".M.host",
            "From: a@example.org\nMessage-ID: <" + std::to_string(i)
              + "@x>\n\nhi\n");
  deliver(box, "2000.bad.host", fixture("malformed_no_from.eml"));
  EXPECT_TRUE(test::eventually(
    [&] {
      return names_in(box / "cur").size() == 70;
    },
    std::chrono::seconds{10}));
  EXPECT_TRUE(sink.wait(
    [&] {
      return sink.invalid_drops() == 1;
    },
    std::chrono::seconds{10}));
  sink.stop().raise();
  runner.join();
  EXPECT_TRUE(names_in(box / "new").empty());
  auto sizes = sink.batch_sizes();
  EXPECT_EQ(std::accumulate(sizes.begin(), sizes.end(), size_t{0}), 70u);
  EXPECT_LE(*std::max_element(sizes.begin(), sizes.end()), 8u)
    << "max_in_flight";
  EXPECT_EQ(names_in(box / "quarantine"),
            (std::vector<std::string>{"2000.bad.host",
                                      "2000.bad.host.reason"}));
}

TEST(MaildirSource, AMaildirThatCannotBeMadeThrowsForTheRunnersBackoff) {
  temp_dir tmp;
  write(tmp.path() / "file", "");
  connector_config cfg;
  cfg.name = "mail";
  cfg.type = connector_type::maildir;
  cfg.path = (tmp.path() / "file" / "box").string();
  cfg.endpoint_identity = "inbox@example.net";
  metrics_registry reg;
  maildir_source source{cfg, register_maildir_metrics(reg, "mail")};
  test::fake_connector_sink sink;
  EXPECT_THROW(source.run(sink), std::runtime_error);
}

TEST(MaildirSource, AReplyWithApproveOrDenyFirstIsOfferedAsAnAnswer) {
  auto parsed = parse_mail(
    "Message-ID: <yes1@mail.example.org>\nFrom: Alice <alice@Example.org>\n"
    "In-Reply-To: <q1@example.net>\nReferences: <root@mail.example.org> "
    "<q1@example.net>\nSubject: Re: x\n\n Approve\n\n> Approve?\n");
  ASSERT_TRUE(parsed.message) << parsed.error;
  auto a = approval_mail_of(*parsed.message, "inbox@example.net");
  ASSERT_TRUE(a);
  EXPECT_TRUE(a->approve);
  EXPECT_EQ(a->from, "alice@example.org");
  EXPECT_EQ(a->notices,
            (std::vector<std::string>{"email:q1@example.net",
                                      "email:root@mail.example.org"}));
  EXPECT_EQ(a->key, "email:17:inbox@example.net:yes1@mail.example.org")
    << "the dedupe key its envelope would get";
  // Not a reply, or another first line: an ordinary message.
  auto fresh = parse_mail("From: a@example.org\nMessage-ID: <n@x>\n\ndeny\n");
  ASSERT_TRUE(fresh.message);
  EXPECT_FALSE(approval_mail_of(*fresh.message, "inbox@example.net"));
  auto other = parse_mail(
    "From: a@example.org\nIn-Reply-To: <q1@example.net>\n\nwhy?\napprove\n");
  ASSERT_TRUE(other.message);
  EXPECT_FALSE(approval_mail_of(*other.message, "inbox@example.net"));
  // What the sink answers, for the poller.
  EXPECT_FALSE(approval_verdict(approval_reply::not_an_answer));
  EXPECT_EQ(approval_verdict(approval_reply::settled)->verdict,
            mail_submit::stored);
  EXPECT_EQ(approval_verdict(approval_reply::later)->verdict,
            mail_submit::later);
}

} // namespace
} // namespace butlers
