// The mail channel end to end: real butlers-node processes polling a real
// Maildir, the real PostgreSQL, and replies at a local SMTP sink that
// speaks RFC 5321 (test/support/smtp_sink.hpp).

#include <algorithm>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <pqxx/pqxx>

#include "runtime/mail.hpp"
#include "test/support/node_fixture.hpp"
#include "test/support/node_process.hpp"
#include "test/support/poll.hpp"
#include "test/support/smtp_sink.hpp"

namespace butlers::test {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

std::string fixture(const std::string& name) {
  return read_file(BUTLERS_SOURCE_DIR "/test/fixtures/mail/" + name);
}

std::vector<std::string> names_in(const fs::path& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  for (auto& e : fs::directory_iterator{dir, ec})
    out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

/// A mail of its own, as a delivery agent writes it.
std::string mail(int i) {
  return "Message-ID: <m" + std::to_string(i)
         + "@mail.example.org>\nFrom: Sender " + std::to_string(i) + " <s"
         + std::to_string(i)
         + "@example.org>\nTo: butlers@example.net\nSubject: Note "
         + std::to_string(i) + "\n\nPlease remember note " + std::to_string(i)
         + ".\n";
}

class MailChannel : public node_fixture {
 protected:
  void SetUp() override {
    use_database("mail");
    use_files("mail");
    box_ = fs::path{dir_} / "Maildir";
  }

  /// Delivers `bytes` the way an MDA does: written to tmp/, renamed into
  /// new/ (the connector creates the directories when it starts, so tests
  /// that deliver first make them).
  void deliver(const std::string& name, const std::string& bytes) {
    for (auto sub : {"tmp", "new", "cur"})
      fs::create_directories(box_ / sub);
    write_file((box_ / "tmp" / name).string(), bytes);
    fs::rename(box_ / "tmp" / name, box_ / "new" / name);
  }

  /// The node: one butler answering every mail, the maildir connector, and
  /// `adapter` as the messenger's.
  std::string config(const std::string& adapter) {
    return node_head("mail-test", 5)
           + "[[butler]]\nname = \"general\"\nmax_concurrent_sessions = 4\n"
             "[butler.runtime]\nturn_ms = 5\n"
             "reply = \"Noted: {prompt}\"\n"
             "[messenger]\n"
           + adapter + "[[connector]]\nname = \"mail\"\ntype = \"maildir\"\n"
           + "path = \"" + box_.string()
           + "\"\nendpoint_identity = \"butlers@example.net\"\n"
             "poll_ms = 50\n";
  }

  std::string outbox_adapter() {
    return "[[messenger.adapter]]\nkind = \"outbox\"\npath = \"" + dir_
           + "/outbox.jsonl\"\n";
  }

  int count(const std::string& sql) {
    pqxx::connection conn{url_};
    pqxx::nontransaction tx{conn};
    return tx.exec1(sql)[0].as<int>();
  }

  double metric(const std::string& series) {
    auto text = http_->get("/metrics").body;
    auto pos = text.find("\n" + series + " ");
    return pos == std::string::npos
             ? -1
             : std::stod(text.substr(pos + series.size() + 2));
  }

  std::string smtp_adapter(const smtp_sink& sink, int retries = 3) {
    return "[[messenger.adapter]]\nkind = \"smtp\"\nchannels = [\"email\"]\n"
           "url = \""
           + sink.url()
           + "\"\nfrom = \"Butlers <butlers@example.net>\"\n"
             "timeout_ms = 5000\nretries = "
           + std::to_string(retries) + "\n";
  }

  std::string ledger(const std::string& column) {
    pqxx::connection conn{url_};
    pqxx::nontransaction tx{conn};
    auto r = tx.exec("SELECT " + column
                     + " FROM outbound_ledger WHERE kind = 'mail'");
    return r.empty() || r[0][0].is_null() ? "" : r[0][0].as<std::string>();
  }

  fs::path box_;
};

TEST_F(MailChannel, AMailInNewIsAnsweredThreadedAtTheSmtpSinkAndEndsInCur) {
  smtp_sink sink;
  ASSERT_TRUE(start_node(config(smtp_adapter(sink))));
  deliver("1700000000.M1P1.test", fixture("reply_with_references.eml"));
  ASSERT_TRUE(sink.wait_for_messages(1, 30s)) << node_->log();
  auto m = sink.messages().at(0);
  EXPECT_EQ(m.mail_from, "butlers@example.net");
  EXPECT_EQ(m.rcpt_to, std::vector<std::string>{"alice.work@example.org"})
    << "Reply-To wins over From";
  EXPECT_EQ(m.header("Subject").value_or(""), "Re: Lunch on Friday?");
  EXPECT_EQ(m.header("In-Reply-To").value_or(""), "<r3@mail.example.org>");
  // Unfolded, a long References keeps the blank it was folded at.
  auto refs = m.header("References").value_or("");
  std::replace(refs.begin(), refs.end(), '\t', ' ');
  EXPECT_EQ(refs, "<root@mail.example.org> <r1@mail.example.org> "
                  "<r2@mail.example.org> <r3@mail.example.org>");
  EXPECT_EQ(m.header("Auto-Submitted").value_or(""), "auto-replied");
  auto parsed = parse_mail(m.data);
  ASSERT_TRUE(parsed.message) << parsed.error;
  EXPECT_NE(parsed.message->text.find("Noted: Re: Lunch on Friday?"),
            std::string::npos)
    << parsed.message->text;
  EXPECT_NE(parsed.message->text.find("Yes, noon works."), std::string::npos);
  EXPECT_TRUE(eventually(
    [&] {
      return names_in(box_ / "cur")
             == std::vector<std::string>{"1700000000.M1P1.test:2,S"};
    },
    10s));
  EXPECT_TRUE(names_in(box_ / "new").empty());
  // The thread is the conversation's root, the sender the From address.
  EXPECT_EQ(count("SELECT count(*) FROM message_inbox WHERE source_channel = "
                  "'email' AND source_thread_identity = "
                  "'root@mail.example.org' AND source_sender_identity = "
                  "'alice@example.org'"),
            1);
  // The same mail again (a fetcher that delivered it twice) is the same
  // request, and nobody gets a second reply.
  deliver("1700000001.M2P1.test", fixture("reply_with_references.eml"));
  EXPECT_TRUE(eventually(
    [&] {
      return names_in(box_ / "cur").size() == 2;
    },
    10s));
  EXPECT_EQ(count("SELECT count(*) FROM message_inbox"), 1);
  EXPECT_TRUE(eventually(
    [&] {
      return metric("butlers_connector_deduped_total{connector=\"mail\"}") == 1;
    },
    10s));
  EXPECT_EQ(sink.message_count(), 1u);
}

TEST_F(MailChannel,
       SigkillAfterACommitThenRestartMakesEachMailExactlyOneRequest) {
  constexpr int mails = 12;
  for (int i = 0; i < mails; ++i)
    deliver("17000000" + std::to_string(10 + i) + ".M" + std::to_string(i)
              + "P1.test",
            mail(i));
  // The fault kills the node right after its first commit, before the
  // connector hears of it: files stored but still in new/.
  ASSERT_TRUE(launch_node(config(outbox_adapter()),
                          {{"BUTLERS_FAULT", "connector_after_commit"}}));
  auto gone = node_->wait_exit(30s);
  ASSERT_TRUE(gone) << "the fault did not fire\n" << node_->log();
  EXPECT_EQ(gone->signal, SIGKILL);
  auto stored = count("SELECT count(*) FROM message_inbox");
  EXPECT_GE(stored, 1);
  EXPECT_EQ(names_in(box_ / "new").size(), static_cast<size_t>(mails))
    << "nothing moved before its commit was acknowledged";
  node_.reset();
  ASSERT_TRUE(start_node(config(outbox_adapter())));
  ASSERT_TRUE(eventually(
    [&] {
      return names_in(box_ / "cur").size() == static_cast<size_t>(mails);
    },
    30s))
    << node_->log();
  EXPECT_TRUE(names_in(box_ / "new").empty());
  EXPECT_EQ(count("SELECT count(*) FROM message_inbox"), mails);
  EXPECT_EQ(count("SELECT count(DISTINCT dedupe_key) FROM message_inbox"),
            mails);
  EXPECT_EQ(count("SELECT count(*) FROM message_inbox WHERE dedupe_key LIKE "
                  "'email:%:m%@mail.example.org'"),
            mails);
  EXPECT_TRUE(eventually(
    [&] {
      return metric("butlers_connector_deduped_total{connector=\"mail\"}")
             == stored;
    },
    10s))
    << "the ones stored before the kill came back as duplicates";
}

TEST_F(MailChannel, MalformedMailIsQuarantinedAndCountedAndTheNodeKeepsGoing) {
  ASSERT_TRUE(start_node(config(outbox_adapter())));
  deliver("1700000001.bad.test", fixture("malformed_garbage.eml"));
  deliver("1700000002.nofrom.test", fixture("malformed_no_from.eml"));
  deliver("1700000003.good.test", fixture("multipart_alternative.eml"));
  ASSERT_TRUE(eventually(
    [&] {
      return names_in(box_ / "quarantine").size() == 4
             && names_in(box_ / "cur").size() == 1;
    },
    30s))
    << node_->log();
  EXPECT_EQ(names_in(box_ / "quarantine"),
            (std::vector<std::string>{"1700000001.bad.test",
                                      "1700000001.bad.test.reason",
                                      "1700000002.nofrom.test",
                                      "1700000002.nofrom.test.reason"}));
  EXPECT_EQ(read_file((box_ / "quarantine" / "1700000001.bad.test").string()),
            fixture("malformed_garbage.eml"))
    << "kept as it came";
  EXPECT_EQ(read_file(
              (box_ / "quarantine" / "1700000002.nofrom.test.reason").string()),
            "not a usable mail: no From mailbox\n");
  EXPECT_EQ(metric("butlers_connector_maildir_files_total{connector=\"mail\","
                   "outcome=\"quarantined\"}"),
            2);
  EXPECT_EQ(metric("butlers_connector_invalid_total{connector=\"mail\"}"), 2);
  // The good one went all the way: stored, answered into the outbox.
  EXPECT_EQ(count("SELECT count(*) FROM message_inbox"), 1);
  EXPECT_TRUE(eventually(
    [&] {
      return read_file(dir_ + "/outbox.jsonl").find("Noted: Lunch on Friday?")
             != std::string::npos;
    },
    30s))
    << node_->log();
  EXPECT_EQ(http_->get("/healthz").status, 200);
}

TEST_F(MailChannel, ARelayThatSaysTryLaterGetsTheReplyOnARetry) {
  smtp_sink sink;
  // Refused after the whole message went over: not recorded as sent.
  sink.inject(smtp_fault::temporary(smtp_fault::stage::data), 2);
  ASSERT_TRUE(start_node(config(smtp_adapter(sink))));
  deliver("1700000000.M1P1.test", fixture("base64.eml"));
  ASSERT_TRUE(sink.wait_for_messages(1, 30s)) << node_->log();
  ASSERT_TRUE(eventually(
    [&] {
      return ledger("state") == "sent";
    },
    10s))
    << node_->log();
  EXPECT_EQ(sink.pending_faults(), 0u);
  EXPECT_EQ(sink.message_count(), 1u);
  auto m = sink.messages().at(0);
  EXPECT_EQ(m.rcpt_to, std::vector<std::string>{"dieter@example.de"});
  EXPECT_EQ(m.header("Message-Id").value_or(""),
            "<" + ledger("provider_id") + ">")
    << "the ledger keeps the Message-ID it sent";
}

TEST_F(MailChannel, APermanentRefusalIsADeadLetterWithItsClass) {
  smtp_sink sink;
  sink.inject(smtp_fault::permanent(smtp_fault::stage::rcpt), 10);
  ASSERT_TRUE(start_node(config(smtp_adapter(sink))));
  deliver("1700000000.M1P1.test", fixture("base64.eml"));
  ASSERT_TRUE(eventually(
    [&] {
      return ledger("state") == "dead";
    },
    30s))
    << node_->log();
  EXPECT_EQ(ledger("error_class"), "target_unavailable");
  EXPECT_EQ(sink.message_count(), 0u);
  // The reply and then the error reply, each refused once: a 5xx is not
  // retried.
  EXPECT_TRUE(eventually(
    [&] {
      return sink.pending_faults() == 8u;
    },
    30s))
    << sink.pending_faults();
  // A request is done only when its reply is delivered: this one ends
  // errored, and its error reply is refused the same way, so the messenger
  // has two dead letters of that class: the reply and the error reply.
  EXPECT_TRUE(eventually(
    [&] {
      return count("SELECT count(*) FROM message_inbox WHERE "
                   "lifecycle_state = 'errored'")
               == 1
             && count("SELECT count(*) FROM dead_letters WHERE error_class = "
                      "'target_unavailable' AND butler = 'messenger'")
                  == 2;
    },
    30s))
    << node_->log();
  EXPECT_EQ(names_in(box_ / "cur").size(), 1u) << "the mail itself was taken";
}

} // namespace
} // namespace butlers::test
