// The smtp messenger adapter against in-memory fakes: the source mail comes
// from fake delivery services, mails go to a recording send function.

#include <fstream>
#include <map>
#include <mutex>
#include <sstream>

#include <gtest/gtest.h>

#include "runtime/delivery.hpp"
#include "runtime/mail.hpp"
#include "runtime/uuid.hpp"
#include "test/support/fake_delivery_services.hpp"

namespace butlers {
namespace {

std::string fixture(const std::string& name) {
  std::ifstream in{BUTLERS_SOURCE_DIR "/test/fixtures/mail/" + name,
                   std::ios::binary};
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

/// The stored ingest.v1 body of a fixture mail, as the inbox row holds it.
std::string stored_envelope(const std::string& name) {
  auto m = parse_mail(fixture(name));
  EXPECT_TRUE(m.message.has_value()) << m.error;
  return mail_to_ingest(*m.message, {"butlers@example.net", 0, {}, {}});
}

/// A recording SMTP relay: answers from a script, then `sent`.
struct fake_relay {
  struct call {
    std::string url;
    smtp_message message;
    std::string username;
    std::string password;
  };
  std::mutex mtx;
  std::vector<call> calls;
  std::vector<smtp_result> script;

  smtp_result operator()(const std::string& url, const smtp_message& m,
                         const std::string& user, const std::string& pass,
                         std::chrono::milliseconds, const std::atomic<bool>*) {
    std::lock_guard<std::mutex> guard{mtx};
    calls.push_back({url, m, user, pass});
    if (calls.size() <= script.size())
      return script[calls.size() - 1];
    smtp_result ok;
    ok.sent = true;
    ok.code = 250;
    return ok;
  }
};

smtp_result refused(int code, bool retryable) {
  smtp_result r;
  r.code = code;
  r.retryable = retryable;
  r.error = "refused with " + std::to_string(code);
  return r;
}

class SmtpAdapter : public testing::Test {
 protected:
  SmtpAdapter() {
    cfg.kind = adapter_kind::smtp;
    cfg.channels = {"email"};
    cfg.url = "smtp://relay.test:2525";
    cfg.from = "Butlers <butlers@example.net>";
    cfg.retries = 0;
    cfg.username_env = "TEST_SMTP_USER";
    cfg.password_env = "TEST_SMTP_PASS";
  }

  std::shared_ptr<smtp_adapter> make() {
    auto getenv_fn = [this](const char* name) -> const char* {
      auto i = env.find(name);
      return i == env.end() ? nullptr : i->second.c_str();
    };
    return std::make_shared<smtp_adapter>(
      cfg,
      [this](auto&&... xs) {
        return relay(std::forward<decltype(xs)>(xs)...);
      },
      getenv_fn,
      [] {
        return int64_t{1700000000000000};
      });
  }

  /// A butler's reply to the mail stored under `request_id`.
  std::string reply_notify(const std::string& sender = "alice@example.org",
                           const std::string& channel = "email") {
    route_envelope env;
    env.request_id = request_id;
    env.received_at = "2026-11-23T04:00:00Z";
    env.source_channel = channel;
    env.source_endpoint_identity = "butlers@example.net";
    env.source_sender_identity = sender;
    return make_notify_json(env, "general", "Noon works for me.", "work-1");
  }

  delivery_attempt deliver(const smtp_adapter& ad, const std::string& notify) {
    auto view = read_notify(notify);
    EXPECT_TRUE(view.has_value());
    return ad.deliver({*view, notify, request_id, segment_id, services});
  }

  /// The mail the relay got on call `i`, parsed back.
  mail_message sent_mail(size_t i = 0) {
    EXPECT_LT(i, relay.calls.size());
    if (i >= relay.calls.size())
      return {};
    auto r = parse_mail(relay.calls[i].message.rfc822);
    EXPECT_TRUE(r.message.has_value()) << r.error;
    return r.message.value_or(mail_message{});
  }

  outbound_key key() const {
    return {request_id, segment_id, "mail"};
  }

  delivery_adapter_config cfg;
  fake_relay relay;
  std::map<std::string, std::string> env;
  test::fake_delivery_services services;
  std::string request_id = make_uuid_v7().to_string();
  std::string segment_id = "notify:work-1";
};

TEST_F(SmtpAdapter, AReplyIsThreadedUnderTheSourceMailAndGoesToReplyTo) {
  services.set_source(request_id, stored_envelope("reply_with_references.eml"));
  auto ad = make();
  auto a = deliver(*ad, reply_notify());
  EXPECT_EQ(a.error, "");
  ASSERT_EQ(relay.calls.size(), 1u);
  auto& c = relay.calls[0];
  EXPECT_EQ(c.url, "smtp://relay.test:2525");
  EXPECT_EQ(c.message.from, "butlers@example.net");
  EXPECT_EQ(c.message.to, std::vector<std::string>{"alice.work@example.org"});
  auto m = sent_mail();
  EXPECT_EQ(m.subject, "Re: Lunch on Friday?") << "no second Re:";
  EXPECT_EQ(m.in_reply_to, "r3@mail.example.org");
  EXPECT_EQ(m.references, (std::vector<std::string>{"root@mail.example.org",
                                                    "r1@mail.example.org",
                                                    "r2@mail.example.org",
                                                    "r3@mail.example.org"}));
  EXPECT_EQ(m.text, "Noon works for me.");
  EXPECT_EQ(m.from.address, "butlers@example.net");
  ASSERT_EQ(m.to.size(), 1u);
  EXPECT_EQ(m.to[0].address, "alice.work@example.org");
  auto row = services.find(key());
  ASSERT_TRUE(row.has_value());
  EXPECT_EQ(row->state, ledger_state::sent);
  EXPECT_EQ(row->kind, outbound_kind::mail);
  EXPECT_EQ(row->adapter, "smtp");
  EXPECT_EQ(row->provider_id, m.message_id);
}

TEST_F(SmtpAdapter, WithoutReplyToTheReplyGoesToFromAndStartsTheReferences) {
  services.set_source(request_id, stored_envelope("multipart_alternative.eml"));
  auto ad = make();
  EXPECT_EQ(deliver(*ad, reply_notify()).error, "");
  ASSERT_EQ(relay.calls.size(), 1u);
  EXPECT_EQ(relay.calls[0].message.to,
            std::vector<std::string>{"alice@example.org"});
  auto m = sent_mail();
  EXPECT_EQ(m.subject, "Re: Lunch on Friday?");
  EXPECT_EQ(m.in_reply_to, "alt-1@mail.example.org");
  EXPECT_EQ(m.references, std::vector<std::string>{"alt-1@mail.example.org"});
}

TEST_F(SmtpAdapter, ASentMailIsNotSentAgain) {
  services.set_source(request_id, stored_envelope("base64.eml"));
  auto ad = make();
  EXPECT_EQ(deliver(*ad, reply_notify("dieter@example.de")).error, "");
  EXPECT_EQ(deliver(*ad, reply_notify("dieter@example.de")).error, "");
  EXPECT_EQ(relay.calls.size(), 1u);
  EXPECT_EQ(services.redelivered(), 0u);
}

TEST_F(SmtpAdapter, ASendInTheCrashWindowGoesAgainWithTheSameMessageId) {
  services.set_source(request_id, stored_envelope("base64.eml"));
  auto ad = make();
  EXPECT_EQ(deliver(*ad, reply_notify("dieter@example.de")).error, "");
  auto first = sent_mail(0).message_id;
  // A run that died between the send and its record.
  test::fake_delivery_services::row r;
  r.adapter = "smtp";
  r.kind = outbound_kind::mail;
  r.state = ledger_state::sending;
  services.preload(key(), r);
  EXPECT_EQ(deliver(*ad, reply_notify("dieter@example.de")).error, "");
  ASSERT_EQ(relay.calls.size(), 2u);
  EXPECT_EQ(sent_mail(1).message_id, first);
  EXPECT_EQ(services.redelivered(), 1u);
  EXPECT_EQ(services.find(key())->state, ledger_state::sent);
}

TEST_F(SmtpAdapter, TransientFailuresAreRetriedThenReportedRetryable) {
  services.set_source(request_id, stored_envelope("base64.eml"));
  cfg.retries = 1;
  relay.script = {refused(451, true), refused(421, true)};
  auto ad = make();
  auto a = deliver(*ad, reply_notify("dieter@example.de"));
  EXPECT_TRUE(a.retryable);
  EXPECT_EQ(a.error_class, "target_unavailable");
  EXPECT_NE(a.error.find("refused with 421"), std::string::npos) << a.error;
  EXPECT_EQ(relay.calls.size(), 2u);
  EXPECT_TRUE(services.dead_letters().empty());
  EXPECT_EQ(services.find(key())->state, ledger_state::sending);
  // The next run (the messenger retries the delivery) gets through.
  EXPECT_EQ(deliver(*ad, reply_notify("dieter@example.de")).error, "");
  EXPECT_EQ(relay.calls.size(), 3u);
  EXPECT_EQ(services.find(key())->state, ledger_state::sent);
}

TEST_F(SmtpAdapter, APermanentRefusalIsADeadLetter) {
  services.set_source(request_id, stored_envelope("base64.eml"));
  cfg.retries = 3;
  relay.script = {refused(550, false)};
  auto ad = make();
  auto a = deliver(*ad, reply_notify("dieter@example.de"));
  EXPECT_FALSE(a.retryable);
  EXPECT_EQ(a.error_class, "target_unavailable");
  EXPECT_EQ(relay.calls.size(), 1u) << "no retry of a 5xx";
  ASSERT_EQ(services.dead_letters().size(), 1u);
  EXPECT_EQ(services.dead_letters()[0].error_class, "target_unavailable");
  EXPECT_EQ(services.find(key())->state, ledger_state::dead);
}

TEST_F(SmtpAdapter, WithoutTheDatabaseNothingIsSentAndItIsRetryable) {
  services.set_source(request_id, stored_envelope("base64.eml"));
  services.set_unavailable(true);
  auto ad = make();
  auto a = deliver(*ad, reply_notify("dieter@example.de"));
  EXPECT_TRUE(a.retryable);
  EXPECT_TRUE(relay.calls.empty());
}

TEST_F(SmtpAdapter, AnAutoSubmittedMailGetsNoAutomaticReply) {
  services.set_source(request_id, stored_envelope("auto_replied.eml"));
  auto ad = make();
  auto a = deliver(*ad, reply_notify("ooo@example.org"));
  EXPECT_FALSE(a.retryable);
  EXPECT_EQ(a.error_class, "validation_error");
  EXPECT_NE(a.error.find("auto-replied"), std::string::npos) << a.error;
  EXPECT_TRUE(relay.calls.empty());
  ASSERT_EQ(services.dead_letters().size(), 1u);
}

TEST_F(SmtpAdapter, ARequestWhoseRowIsGoneIsAnsweredWithoutThreading) {
  auto ad = make();
  EXPECT_EQ(deliver(*ad, reply_notify("carol@example.org")).error, "");
  ASSERT_EQ(relay.calls.size(), 1u);
  EXPECT_EQ(relay.calls[0].message.to,
            std::vector<std::string>{"carol@example.org"});
  auto m = sent_mail();
  EXPECT_EQ(m.subject, "Re: your message");
  EXPECT_EQ(m.in_reply_to, "");
}

TEST_F(SmtpAdapter, ASenderThatIsNoAddressIsAValidationError) {
  auto ad = make();
  auto a = deliver(*ad, reply_notify("user-1", "api"));
  EXPECT_FALSE(a.retryable);
  EXPECT_EQ(a.error_class, "validation_error");
  EXPECT_NE(a.error.find("'user-1'"), std::string::npos) << a.error;
  EXPECT_TRUE(relay.calls.empty());
}

TEST_F(SmtpAdapter, ASendHasTheButlersSubjectAndNoThreading) {
  auto notify = R"({"schema_version":"notify.v1","origin_butler":"health",)"
                R"("delivery":{"intent":"send","channel":"email",)"
                R"("recipient":"Dana <dana@example.org>",)"
                R"("subject":"Your weekly summary","message":"All well."}})";
  auto ad = make();
  EXPECT_EQ(deliver(*ad, notify).error, "");
  ASSERT_EQ(relay.calls.size(), 1u);
  EXPECT_EQ(relay.calls[0].message.to,
            std::vector<std::string>{"dana@example.org"});
  auto m = sent_mail();
  EXPECT_EQ(m.subject, "Your weekly summary");
  EXPECT_EQ(m.in_reply_to, "");
  EXPECT_TRUE(m.references.empty());
  EXPECT_EQ(m.auto_submitted, "");
}

TEST_F(SmtpAdapter, CredentialsComeFromTheNamedEnvironmentVariables) {
  services.set_source(request_id, stored_envelope("base64.eml"));
  env["TEST_SMTP_USER"] = "relay-user";
  env["TEST_SMTP_PASS"] = "s3cret";
  auto ad = make();
  EXPECT_EQ(deliver(*ad, reply_notify("dieter@example.de")).error, "");
  ASSERT_EQ(relay.calls.size(), 1u);
  EXPECT_EQ(relay.calls[0].username, "relay-user");
  EXPECT_EQ(relay.calls[0].password, "s3cret");
}

TEST_F(SmtpAdapter, TheFactoryMakesOneForKindSmtp) {
  auto ad = make_delivery_adapter(cfg);
  EXPECT_NE(dynamic_cast<const smtp_adapter*>(ad.get()), nullptr);
  EXPECT_FALSE(ad->nonblocking()) << "SMTP blocks";
  EXPECT_TRUE(ad->serves("email"));
  EXPECT_FALSE(ad->serves("telegram"));
}

} // namespace
} // namespace butlers
