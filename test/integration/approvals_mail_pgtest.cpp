// Approvals by mail (runtime/approvals.md) against a real node process,
// real PostgreSQL, a real Maildir and the local SMTP sink: a run started
// by mail whose fake codex asks item/commandExecution/requestApproval
// (its reply ends "approval: <decision>") puts the question to the
// starter as a reply to their mail; their reply whose first line is
// `approve` or `deny` answers it instead of becoming a request, once even
// when the same mail comes twice; someone else's reply is refused and
// counted; a late answer is told the question was decided; any other
// reply is an ordinary message.

#include <chrono>
#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <pqxx/pqxx>

#include "runtime/json.hpp"
#include "runtime/mail.hpp"
#include "test/support/node_fixture.hpp"
#include "test/support/node_process.hpp"
#include "test/support/poll.hpp"
#include "test/support/smtp_sink.hpp"

namespace butlers::test {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

class ApprovalsByMail : public node_fixture {
 protected:
  smtp_sink sink;
  fs::path box_;
  int files_ = 0;

  void start() {
    use_database("approvals_mail");
    use_files("approvals_mail");
    box_ = fs::path{dir_} / "Maildir";
    ASSERT_TRUE(start_node(
      node_head("approvals-mail-test", 5)
      + "[[butler]]\nname = \"health\"\nkeywords = [\"pill\"]\n"
        "approvals = \"ask\"\napproval_timeout_s = 60\nlease_s = 4\n"
        "[butler.runtime]\nkind = \"cli\"\nfamily = \"codex\"\n"
        "command = [\"env\", \"FAKE_CODEX_APPROVAL=1\", "
      + json::quote(BUTLERS_FAKE_CODEX)
      + "]\n[[connector]]\nname = \"mail\"\ntype = \"maildir\"\npath = \""
      + box_.string()
      + "\"\nendpoint_identity = \"butlers@example.net\"\npoll_ms = 50\n"
        "[[messenger.adapter]]\nkind = \"smtp\"\nchannels = [\"email\"]\n"
        "url = \""
      + sink.url()
      + "\"\nfrom = \"Butlers <butlers@example.net>\"\n"
        "timeout_ms = 5000\n"));
  }

  /// Delivers a mail as an MDA does (tmp/, then renamed into new/);
  /// returns its file name.
  std::string deliver(const std::string& bytes) {
    for (auto sub : {"tmp", "new", "cur"})
      fs::create_directories(box_ / sub);
    auto name = "17000000" + std::to_string(10 + files_) + ".M"
                + std::to_string(files_) + "P1.test";
    ++files_;
    write_file((box_ / "tmp" / name).string(), bytes);
    fs::rename(box_ / "tmp" / name, box_ / "new" / name);
    return name;
  }

  /// Alice asks the health butler something that needs a yes.
  void ask() {
    deliver("Message-ID: <start1@mail.example.org>\nFrom: Alice "
            "<alice@example.org>\nTo: butlers@example.net\nSubject: The "
            "build\n\nmy pill: clean the build\n");
  }

  /// A reply to the question's mail `question_id`, from `from`, saying
  /// `text` above the quoted question.
  std::string answer(const std::string& message_id, const std::string& from,
                     const std::string& question_id, const std::string& text) {
    return deliver("Message-ID: <" + message_id + ">\nFrom: " + from
                   + "\nTo: butlers@example.net\nSubject: Re: The build\n"
                     "In-Reply-To: <"
                   + question_id + ">\nReferences: <start1@mail.example.org> <"
                   + question_id + ">\n\n" + text
                   + "\n\nOn Sunday, Butlers wrote:\n> health asks to use "
                     "shell: rm -rf build\n> Approve?\n");
  }

  bool in_cur(const std::string& name) {
    return fs::exists(box_ / "cur" / (name + ":2,S"));
  }

  /// The text of each mail the sink got that contains `part`.
  std::vector<std::string> mails_with(const std::string& part) {
    std::vector<std::string> out;
    for (auto& m : sink.messages()) {
      auto parsed = parse_mail(m.data);
      if (parsed.message
          && parsed.message->text.find(part) != std::string::npos)
        out.push_back(parsed.message->text);
    }
    return out;
  }

  /// Waits for the question's mail; returns its Message-ID (no brackets).
  std::string question() {
    std::string id;
    eventually(
      [&] {
        for (auto& m : sink.messages())
          if (parse_mail(m.data).message
              && parse_mail(m.data).message->text.find("asks to use shell")
                   != std::string::npos) {
            id = parse_mail(m.data).message->message_id;
            return true;
          }
        return false;
      },
      30s);
    return id;
  }

  /// Waits for the run's answer (the fake's "echo: ..." mail).
  std::string wait_reply() {
    eventually(
      [&] {
        return !mails_with("approval: ").empty();
      },
      30s);
    auto all = mails_with("approval: ");
    return all.empty() ? std::string{} : all.front();
  }

  std::vector<std::string> row() {
    pqxx::connection conn{url_};
    pqxx::nontransaction tx{conn};
    auto r = tx.exec("SELECT status, coalesce(answered_by, ''), notice_ref, "
                     "requester_channel, requester_sender FROM approvals");
    std::vector<std::string> out;
    if (r.size() == 1)
      for (auto f : r[0])
        out.push_back(f.as<std::string>());
    return out;
  }

  int count(const std::string& sql) {
    pqxx::connection conn{url_};
    pqxx::nontransaction tx{conn};
    return tx.exec1(sql)[0].as<int>();
  }

  double metric(const std::string& series) {
    auto body = http_->get("/metrics").body;
    auto at = body.find("\n" + series + " ");
    return at == std::string::npos
             ? -1
             : std::stod(body.substr(at + series.size() + 2));
  }
};

TEST_F(ApprovalsByMail, TheStarterApprovesByMailAndTheRunFinishes) {
  start();
  ask();
  auto qid = question();
  ASSERT_FALSE(qid.empty()) << node_->log();
  // The question answers Alice's mail, says how to answer, and its
  // Message-ID is on record before anyone can reply to it.
  auto sent = sink.messages().at(0);
  EXPECT_EQ(sent.rcpt_to, std::vector<std::string>{"alice@example.org"});
  EXPECT_EQ(sent.header("In-Reply-To").value_or(""),
            "<start1@mail.example.org>");
  auto text = mails_with("asks to use shell").at(0);
  EXPECT_NE(text.find("health asks to use shell: rm -rf build"),
            std::string::npos)
    << text;
  EXPECT_NE(text.find(R"(reply to this mail with "approve" or "deny" on the )"
                      "first line"),
            std::string::npos)
    << text;
  auto pending = row();
  ASSERT_EQ(pending.size(), 5u);
  EXPECT_EQ(pending[0], "pending");
  EXPECT_EQ(pending[2], "email:" + qid);
  EXPECT_EQ(pending[3], "email");
  EXPECT_EQ(pending[4], "alice@example.org");
  // "Approve" on the first line, the question quoted below.
  auto yes = answer("yes1@mail.example.org", "Alice <alice@example.org>", qid,
                    "  Approve  ");
  auto reply = wait_reply();
  EXPECT_NE(reply.find("approval: accept"), std::string::npos)
    << reply << node_->log();
  ASSERT_TRUE(eventually(
    [&] {
      return in_cur(yes);
    },
    10s));
  auto done = row();
  EXPECT_EQ(done[0], "approved");
  EXPECT_EQ(done[1], "email:alice@example.org");
  EXPECT_EQ(count("SELECT count(*) FROM approvals WHERE answer_key = "
                  "'email:19:butlers@example.net:yes1@mail.example.org'"),
            1)
    << "the answering mail's dedupe key is kept with the answer";
  EXPECT_EQ(count("SELECT count(*) FROM message_inbox"), 1)
    << "the answer is no request";
  EXPECT_EQ(metric(R"(butlers_approvals_total{outcome="answered"})"), 1);
  // The same mail delivered again: the answer it gave, nothing more (no
  // request, no note that it was decided).
  auto again = answer("yes1@mail.example.org", "Alice <alice@example.org>", qid,
                      "  Approve  ");
  ASSERT_TRUE(eventually(
    [&] {
      return in_cur(again);
    },
    10s))
    << node_->log();
  EXPECT_EQ(count("SELECT count(*) FROM message_inbox"), 1);
  EXPECT_EQ(count("SELECT count(*) FROM route_work WHERE segment_id LIKE "
                  "'notify:apn:%'"),
            0);
  EXPECT_EQ(row()[0], "approved");
  EXPECT_EQ(metric(R"(butlers_approvals_total{outcome="answered"})"), 1);
}

TEST_F(ApprovalsByMail, ADenyByMailReachesTheModel) {
  start();
  ask();
  auto qid = question();
  ASSERT_FALSE(qid.empty()) << node_->log();
  answer("no1@mail.example.org", "alice@example.org", qid, "deny");
  auto reply = wait_reply();
  EXPECT_NE(reply.find("approval: decline"), std::string::npos)
    << reply << node_->log();
  EXPECT_EQ(row()[0], "denied");
  EXPECT_EQ(count("SELECT count(*) FROM message_inbox"), 1);
}

TEST_F(ApprovalsByMail,
       SomeoneElsesReplyIsRefusedAndALateOneIsToldItIsDecided) {
  start();
  ask();
  auto qid = question();
  ASSERT_FALSE(qid.empty()) << node_->log();
  // Bob was copied and approves: refused, counted, logged; no request.
  auto bob = answer("bob1@mail.example.org", "Bob <bob@example.org>", qid,
                    "approve");
  ASSERT_TRUE(eventually(
    [&] {
      return in_cur(bob);
    },
    10s))
    << node_->log();
  EXPECT_EQ(metric("butlers_approval_refusals_total"), 1);
  EXPECT_NE(node_->log().find("refused: only the run's starter"),
            std::string::npos);
  EXPECT_EQ(row()[0], "pending");
  EXPECT_EQ(count("SELECT count(*) FROM message_inbox"), 1);
  // Alice asks back instead of answering: an ordinary message.
  answer("ask1@mail.example.org", "alice@example.org", qid,
         "What would this delete?");
  ASSERT_TRUE(eventually(
    [&] {
      return count("SELECT count(*) FROM message_inbox") == 2;
    },
    10s))
    << node_->log();
  EXPECT_EQ(row()[0], "pending");
  // Then she denies, and later changes her mind: too late, and told so.
  answer("no1@mail.example.org", "alice@example.org", qid, "DENY");
  auto reply = wait_reply();
  EXPECT_NE(reply.find("approval: decline"), std::string::npos)
    << reply << node_->log();
  answer("yes2@mail.example.org", "alice@example.org", qid, "approve");
  ASSERT_TRUE(eventually(
    [&] {
      return !mails_with("decided already").empty();
    },
    30s))
    << node_->log();
  EXPECT_NE(mails_with("decided already").at(0).find("(denied)"),
            std::string::npos);
  EXPECT_EQ(row()[0], "denied");
  EXPECT_EQ(count("SELECT count(*) FROM message_inbox"), 2);
  EXPECT_EQ(metric("butlers_approval_refusals_total"), 1);
}

} // namespace
} // namespace butlers::test
