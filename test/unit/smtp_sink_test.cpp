// The SMTP sink (test/support/smtp_sink.hpp) speaks RFC 5321 over real
// loopback TCP: raw dialogues, the way a mail client talks to it.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <future>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "test/support/smtp_sink.hpp"

using namespace butlers::test;
using namespace std::chrono_literals;

namespace {

/// A raw SMTP client: one line out, one (possibly multi-line) reply in.
class dialogue {
 public:
  explicit dialogue(uint16_t port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&addr),
                           sizeof(addr))
                 == 0;
  }

  ~dialogue() {
    ::close(fd_);
  }

  bool connected() const {
    return connected_;
  }

  /// Sends `line` + CRLF and returns the reply.
  std::string say(const std::string& line) {
    send_raw(line + "\r\n");
    return reply();
  }

  void send_raw(const std::string& bytes) {
    ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
  }

  /// The next complete reply ("250-a\r\n250 b" for a multi-line one, without
  /// the last CRLF); "" on EOF or after 5 s.
  std::string reply() {
    std::string out;
    for (;;) {
      auto line = read_line();
      if (!line)
        return out;
      out += out.empty() ? *line : "\r\n" + *line;
      if (line->size() < 4 || (*line)[3] != '-')
        return out;
    }
  }

  /// True when the server closed the connection within `timeout`.
  bool closed_within(std::chrono::milliseconds timeout) {
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(timeout.count())) != 1)
      return false;
    char c;
    return ::recv(fd_, &c, 1, 0) == 0;
  }

 private:
  std::optional<std::string> read_line() {
    for (;;) {
      auto eol = buf_.find("\r\n");
      if (eol != std::string::npos) {
        auto line = buf_.substr(0, eol);
        buf_.erase(0, eol + 2);
        return line;
      }
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, 5000) != 1)
        return std::nullopt;
      char chunk[4096];
      auto n = ::recv(fd_, chunk, sizeof(chunk), 0);
      if (n <= 0)
        return std::nullopt;
      buf_.append(chunk, static_cast<size_t>(n));
    }
  }

  int fd_ = -1;
  bool connected_ = false;
  std::string buf_;
};

std::string code(const std::string& reply) {
  return reply.substr(0, 3);
}

/// Greeting, EHLO, MAIL, one RCPT and DATA up to 354.
void open_transaction(dialogue& d, const std::string& to = "bob@example.org") {
  ASSERT_EQ(code(d.reply()), "220");
  ASSERT_EQ(code(d.say("EHLO client.test")), "250");
  ASSERT_EQ(code(d.say("MAIL FROM:<butler@example.org>")), "250");
  ASSERT_EQ(code(d.say("RCPT TO:<" + to + ">")), "250");
}

} // namespace

TEST(smtp_sink,
     a_transaction_is_recorded_with_envelope_headers_and_unstuffed_data) {
  smtp_sink sink;
  dialogue d{sink.port()};
  ASSERT_TRUE(d.connected());
  auto greeting = d.reply();
  EXPECT_EQ(greeting, "220 sink.test ESMTP butlers test sink");
  auto ehlo = d.say("EHLO client.test");
  EXPECT_EQ(ehlo.rfind("250-sink.test", 0), 0u) << ehlo;
  EXPECT_NE(ehlo.find("250-8BITMIME"), std::string::npos);
  EXPECT_NE(ehlo.find("250-SIZE 10485760"), std::string::npos);
  EXPECT_NE(ehlo.find("250-AUTH PLAIN LOGIN"), std::string::npos);
  EXPECT_EQ(ehlo.find("STARTTLS"), std::string::npos);
  EXPECT_EQ(code(d.say("MAIL FROM:<butler@example.org> BODY=8BITMIME")), "250");
  EXPECT_EQ(code(d.say("RCPT TO:<bob@example.org>")), "250");
  EXPECT_EQ(code(d.say("RCPT TO:<carol@example.org>")), "250");
  EXPECT_EQ(code(d.say("DATA")), "354");
  auto end = d.say("From: Butler <butler@example.org>\r\n"
                   "To: bob@example.org\r\n"
                   "Subject: Re: the agenda\r\n"
                   "  for tomorrow\r\n"
                   "message-id: <r1@example.org>\r\n"
                   "References: <a@x> <b@x>\r\n"
                   "\r\n"
                   "Hello Bob,\r\n"
                   "..hidden dot\r\n"
                   "...\r\n"
                   "bye\r\n"
                   ".");
  EXPECT_EQ(code(end), "250") << end;
  EXPECT_EQ(code(d.say("QUIT")), "221");
  ASSERT_TRUE(sink.wait_for_messages(1, 5s));
  auto m = sink.messages().at(0);
  EXPECT_EQ(m.helo, "client.test");
  EXPECT_EQ(m.mail_from, "butler@example.org");
  EXPECT_EQ(m.mail_params, "BODY=8BITMIME");
  EXPECT_EQ(m.rcpt_to,
            (std::vector<std::string>{"bob@example.org", "carol@example.org"}));
  EXPECT_EQ(m.header("subject"), "Re: the agenda  for tomorrow");
  EXPECT_EQ(m.header("Message-ID"), "<r1@example.org>");
  EXPECT_EQ(m.header("In-Reply-To"), std::nullopt);
  EXPECT_EQ(m.headers_named("REFERENCES"),
            (std::vector<std::string>{"<a@x> <b@x>"}));
  EXPECT_EQ(m.body(), "Hello Bob,\r\n.hidden dot\r\n..\r\nbye\r\n");
  EXPECT_EQ(m.data.rfind("From: Butler", 0), 0u);
  EXPECT_EQ(sink.commands().back(), "QUIT");
}

TEST(smtp_sink,
     auth_plain_and_login_check_the_credentials_and_record_the_user) {
  smtp_sink_options o;
  o.username = "butler";
  o.password = "s3cret";
  o.require_auth = true;
  smtp_sink sink{o};
  {
    dialogue d{sink.port()};
    d.reply();
    d.say("EHLO client.test");
    EXPECT_EQ(code(d.say("MAIL FROM:<a@x>")), "530");
    auto plain = base64_encode(std::string{"\0butler\0s3cret", 14});
    EXPECT_EQ(d.say("AUTH PLAIN " + plain),
              "235 2.7.0 Authentication successful");
    EXPECT_EQ(code(d.say("AUTH PLAIN " + plain)), "503");
    EXPECT_EQ(code(d.say("MAIL FROM:<a@x>")), "250");
    EXPECT_EQ(code(d.say("RCPT TO:<b@x>")), "250");
    EXPECT_EQ(code(d.say("DATA")), "354");
    EXPECT_EQ(code(d.say("Subject: hi\r\n\r\nbody\r\n.")), "250");
  }
  {
    dialogue d{sink.port()};
    d.reply();
    d.say("EHLO client.test");
    EXPECT_EQ(d.say("AUTH LOGIN"), "334 " + base64_encode("Username:"));
    EXPECT_EQ(d.say(base64_encode("butler")),
              "334 " + base64_encode("Password:"));
    EXPECT_EQ(code(d.say(base64_encode("wrong"))), "535");
    EXPECT_EQ(code(d.say("AUTH LOGIN " + base64_encode("butler"))), "334");
    EXPECT_EQ(code(d.say("*")), "501");
    EXPECT_EQ(code(d.say("AUTH CRAM-MD5")), "504");
    EXPECT_EQ(code(d.say("AUTH PLAIN")), "334");
    EXPECT_EQ(code(d.say("not base64!")), "501");
  }
  ASSERT_TRUE(sink.wait_for_messages(1, 5s));
  EXPECT_EQ(sink.messages()[0].auth_user, "butler");
  auto auths = sink.auth_attempts();
  ASSERT_EQ(auths.size(), 2u);
  EXPECT_EQ(auths[0].mechanism, "PLAIN");
  EXPECT_TRUE(auths[0].accepted);
  EXPECT_EQ(auths[1].mechanism, "LOGIN");
  EXPECT_EQ(auths[1].user, "butler");
  EXPECT_FALSE(auths[1].accepted);
  for (const auto& c : sink.commands())
    EXPECT_EQ(c.find("s3cret"), std::string::npos) << c;
}

TEST(smtp_sink,
     a_fault_at_rcpt_fails_its_transaction_and_the_next_one_succeeds) {
  smtp_sink sink;
  sink.inject(smtp_fault::temporary(smtp_fault::stage::rcpt));
  sink.inject(smtp_fault::permanent(smtp_fault::stage::rcpt));
  dialogue d{sink.port()};
  d.reply();
  d.say("EHLO client.test");
  for (auto expected : {"451", "550"}) {
    EXPECT_EQ(code(d.say("MAIL FROM:<a@x>")), "250");
    EXPECT_EQ(code(d.say("RCPT TO:<b@x>")), expected);
    EXPECT_EQ(code(d.say("RCPT TO:<c@x>")), expected);
    EXPECT_EQ(code(d.say("DATA")), "554");
    EXPECT_EQ(code(d.say("RSET")), "250");
  }
  EXPECT_EQ(sink.pending_faults(), 0u);
  EXPECT_EQ(code(d.say("MAIL FROM:<a@x>")), "250");
  EXPECT_EQ(code(d.say("RCPT TO:<b@x>")), "250");
  EXPECT_EQ(code(d.say("DATA")), "354");
  EXPECT_EQ(code(d.say("Subject: third\r\n\r\nok\r\n.")), "250");
  ASSERT_TRUE(sink.wait_for_messages(1, 5s));
  EXPECT_EQ(sink.message_count(), 1u);
  EXPECT_EQ(sink.messages()[0].header("Subject"), "third");
}

TEST(smtp_sink, a_fault_at_data_refuses_the_message_after_its_last_line) {
  smtp_sink sink;
  sink.inject(smtp_fault::temporary(smtp_fault::stage::data));
  sink.inject(smtp_fault::permanent(smtp_fault::stage::data));
  dialogue d{sink.port()};
  open_transaction(d);
  EXPECT_EQ(code(d.say("DATA")), "354");
  EXPECT_EQ(d.say("Subject: one\r\n\r\nx\r\n."),
            "451 4.3.0 Temporary failure, try again later");
  EXPECT_EQ(code(d.say("MAIL FROM:<a@x>")), "250");
  EXPECT_EQ(code(d.say("RCPT TO:<b@x>")), "250");
  EXPECT_EQ(code(d.say("DATA")), "354");
  EXPECT_EQ(code(d.say("Subject: two\r\n\r\nx\r\n.")), "550");
  EXPECT_EQ(sink.message_count(), 0u);
}

TEST(smtp_sink, commands_out_of_order_get_503_and_unknown_ones_502) {
  smtp_sink sink;
  dialogue d{sink.port()};
  d.reply();
  EXPECT_EQ(code(d.say("MAIL FROM:<a@x>")), "503");
  EXPECT_EQ(d.say("HELO client.test"), "250 sink.test");
  EXPECT_EQ(code(d.say("RCPT TO:<b@x>")), "503");
  EXPECT_EQ(code(d.say("DATA")), "503");
  EXPECT_EQ(code(d.say("MAIL FROM:<a@x>")), "250");
  EXPECT_EQ(code(d.say("MAIL FROM:<a@x>")), "503");
  EXPECT_EQ(code(d.say("DATA")), "503");
  EXPECT_EQ(code(d.say("RSET")), "250");
  EXPECT_EQ(code(d.say("RCPT TO:<b@x>")), "503"); // RSET ended the transaction
  EXPECT_EQ(code(d.say("NOOP")), "250");
  EXPECT_EQ(code(d.say("STARTTLS")), "502");
  EXPECT_EQ(code(d.say("XYZZY")), "502");
  EXPECT_EQ(code(d.say("MAIL TO:<a@x>")), "501");
  EXPECT_EQ(code(d.say("MAIL FROM:<a@x> SIZE=999999999")), "552");
  EXPECT_EQ(code(d.say("QUIT")), "221");
  EXPECT_TRUE(d.closed_within(5s));
}

TEST(smtp_sink, wait_for_messages_wakes_when_another_connection_delivers) {
  smtp_sink sink;
  EXPECT_FALSE(sink.wait_for_messages(1, 50ms));
  auto sender = std::async(std::launch::async, [&] {
    dialogue d{sink.port()};
    open_transaction(d, "late@example.org");
    d.say("DATA");
    return d.say("Subject: later\r\n\r\n.");
  });
  EXPECT_TRUE(sink.wait_for_messages(1, 5s));
  EXPECT_EQ(code(sender.get()), "250");
  EXPECT_EQ(sink.messages()[0].rcpt_to.at(0), "late@example.org");
  EXPECT_EQ(sink.messages()[0].body(), "");
  EXPECT_EQ(sink.sessions(), 1u);
}

TEST(smtp_sink, destroying_the_sink_closes_open_connections) {
  auto sink = std::make_unique<smtp_sink>();
  dialogue d{sink->port()};
  EXPECT_EQ(code(d.reply()), "220");
  auto started = std::chrono::steady_clock::now();
  sink.reset();
  EXPECT_TRUE(d.closed_within(5s));
  EXPECT_LT(std::chrono::steady_clock::now() - started, 5s);
}

TEST(smtp_sink, base64_round_trips_and_rejects_garbage) {
  std::vector<std::string> samples{"",    "a",    "ab",
                                   "abc", "abcd", std::string{"\0u\0p", 4}};
  for (const auto& s : samples)
    EXPECT_EQ(base64_decode(base64_encode(s)), s);
  EXPECT_EQ(base64_encode("Username:"), "VXNlcm5hbWU6");
  EXPECT_EQ(base64_decode("abc"), std::nullopt);
  EXPECT_EQ(base64_decode("a=bc"), std::nullopt);
  EXPECT_EQ(base64_decode("ab!c"), std::nullopt);
}
