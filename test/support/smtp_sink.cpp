#include "test/support/smtp_sink.hpp"

#include <algorithm>
#include <cctype>

namespace butlers::test {

namespace {

std::string upper(std::string_view s) {
  std::string out{s};
  for (auto& c : out)
    c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && upper(a) == upper(b);
}

/// RFC 5321 §4.5.2: a line that starts with '.' had one added.
std::string_view unstuff(std::string_view line) {
  return !line.empty() && line.front() == '.' ? line.substr(1) : line;
}

/// "<a@b> SIZE=1" -> {"a@b", "SIZE=1"}; nullopt without the brackets.
std::optional<std::pair<std::string, std::string>> parse_path(
  std::string_view arg) {
  while (!arg.empty() && arg.front() == ' ')
    arg.remove_prefix(1);
  if (arg.empty() || arg.front() != '<')
    return std::nullopt;
  auto close = arg.find('>');
  if (close == std::string_view::npos)
    return std::nullopt;
  std::string path{arg.substr(1, close - 1)};
  auto rest = arg.substr(close + 1);
  while (!rest.empty() && rest.front() == ' ')
    rest.remove_prefix(1);
  return std::make_pair(path, std::string{rest});
}

/// The value of `SIZE=` in MAIL parameters, if any.
std::optional<size_t> size_param(const std::string& params) {
  auto u = upper(params);
  auto at = u.find("SIZE=");
  if (at == std::string::npos || (at > 0 && u[at - 1] != ' '))
    return std::nullopt;
  try {
    return static_cast<size_t>(std::stoull(u.substr(at + 5)));
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

/// Splits the header section of `data` (RFC 5322 §2.2.3 unfolding).
std::vector<std::pair<std::string, std::string>> parse_headers(
  const std::string& data) {
  std::vector<std::pair<std::string, std::string>> out;
  size_t pos = 0;
  while (pos < data.size()) {
    auto eol = data.find("\r\n", pos);
    if (eol == std::string::npos)
      eol = data.size();
    std::string_view line{data.data() + pos, eol - pos};
    pos = eol + 2;
    if (line.empty())
      break; // end of the header section
    if ((line.front() == ' ' || line.front() == '\t') && !out.empty()) {
      out.back().second += line;
      continue;
    }
    auto colon = line.find(':');
    if (colon == std::string_view::npos)
      continue; // not a header; a test can still read `data`
    auto value = line.substr(colon + 1);
    while (!value.empty() && (value.front() == ' ' || value.front() == '\t'))
      value.remove_prefix(1);
    out.emplace_back(std::string{line.substr(0, colon)}, std::string{value});
  }
  return out;
}

constexpr std::string_view b64_alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghij"
                                          "klmnopqrstuvwxyz0123456789+/";

} // namespace

// -- smtp_received
// ---------------------------------------------------------------

std::optional<std::string> smtp_received::header(std::string_view name) const {
  for (const auto& [k, v] : headers)
    if (iequals(k, name))
      return v;
  return std::nullopt;
}

std::vector<std::string> smtp_received::headers_named(
  std::string_view name) const {
  std::vector<std::string> out;
  for (const auto& [k, v] : headers)
    if (iequals(k, name))
      out.push_back(v);
  return out;
}

std::string smtp_received::body() const {
  if (data.rfind("\r\n", 0) == 0)
    return data.substr(2);
  auto sep = data.find("\r\n\r\n");
  return sep == std::string::npos ? std::string{} : data.substr(sep + 4);
}

smtp_fault smtp_fault::temporary(stage at) {
  return {at, 451, "4.3.0 Temporary failure, try again later"};
}

smtp_fault smtp_fault::permanent(stage at) {
  return {at, 550, "5.7.1 Message refused"};
}

// -- one connection
// --------------------------------------------------------------

/// The dialogue on one connection (RFC 5321 §4.1.4 ordering).
class smtp_session {
 public:
  smtp_session(smtp_sink& sink, loopback_connection& conn)
    : sink_(sink), opts_(sink.options_), conn_(conn) {
    // nop
  }

  void run() {
    if (!reply("220 " + opts_.hostname + " ESMTP butlers test sink"))
      return;
    while (auto line = read_line()) {
      auto sp = line->find(' ');
      auto verb = upper(line->substr(0, sp));
      auto arg = sp == std::string::npos ? std::string{} : line->substr(sp + 1);
      sink_.record_command(
        verb == "AUTH" ? "AUTH " + upper(arg.substr(0, arg.find(' '))) : *line);
      if (line->size() > 510) {
        if (!reply("500 5.5.0 Error: line too long"))
          return;
        continue;
      }
      if (!command(verb, arg))
        return;
    }
  }

 private:
  bool command(const std::string& verb, const std::string& arg) {
    if (verb == "EHLO" || verb == "HELO")
      return hello(verb == "EHLO", arg);
    if (verb == "AUTH")
      return auth(arg);
    if (verb == "MAIL")
      return mail(arg);
    if (verb == "RCPT")
      return rcpt(arg);
    if (verb == "DATA")
      return data();
    if (verb == "RSET") {
      reset();
      return reply("250 2.0.0 Ok");
    }
    if (verb == "NOOP")
      return reply("250 2.0.0 Ok");
    if (verb == "VRFY")
      return reply("252 2.0.0 Cannot VRFY user, but will accept message");
    if (verb == "HELP")
      return reply("214 2.0.0 https://www.rfc-editor.org/rfc/rfc5321");
    if (verb == "QUIT") {
      reply("221 2.0.0 Bye");
      return false;
    }
    if (verb == "STARTTLS")
      return reply("502 5.5.1 Error: STARTTLS not offered");
    return reply("502 5.5.2 Error: command not recognized");
  }

  bool hello(bool extended, const std::string& arg) {
    if (arg.empty())
      return reply("501 5.5.4 Syntax: "
                   + std::string{extended ? "EHLO" : "HELO"} + " hostname");
    reset();
    helo_ = arg;
    if (!extended)
      return reply("250 " + opts_.hostname);
    return reply("250-" + opts_.hostname + " Hello " + arg + "\r\n250-SIZE "
                 + std::to_string(opts_.max_size)
                 + "\r\n250-8BITMIME\r\n250-AUTH PLAIN LOGIN\r\n"
                   "250 ENHANCEDSTATUSCODES");
  }

  bool auth(const std::string& arg) {
    if (helo_.empty())
      return reply("503 5.5.1 Error: send EHLO first");
    if (!auth_user_.empty())
      return reply("503 5.5.1 Error: already authenticated");
    if (in_mail_)
      return reply("503 5.5.1 Error: MAIL transaction in progress");
    auto sp = arg.find(' ');
    auto mech = upper(arg.substr(0, sp));
    std::optional<std::string> initial;
    if (sp != std::string::npos)
      initial = arg.substr(sp + 1);
    std::optional<std::pair<std::string, std::string>> creds;
    if (mech == "PLAIN")
      creds = auth_plain(initial);
    else if (mech == "LOGIN")
      creds = auth_login(initial);
    else
      return reply("504 5.5.4 Unrecognized authentication type");
    if (!creds)
      return !closed_ && reply(auth_error_);
    bool ok = opts_.username.empty()
              || (creds->first == opts_.username
                  && creds->second == opts_.password);
    sink_.record_auth({mech, creds->first, ok});
    if (!ok)
      return reply("535 5.7.8 Error: authentication failed");
    auth_user_ = creds->first;
    return reply("235 2.7.0 Authentication successful");
  }

  /// The client's next AUTH line decoded, after a 334 `challenge`.
  std::optional<std::string> challenge(const std::string& challenge) {
    if (!reply("334 " + challenge)) {
      closed_ = true;
      return std::nullopt;
    }
    auto line = read_line();
    if (!line) {
      closed_ = true;
      return std::nullopt;
    }
    if (*line == "*") {
      auth_error_ = "501 5.7.0 Authentication aborted";
      return std::nullopt;
    }
    return decode(*line);
  }

  std::optional<std::string> decode(const std::string& text) {
    auto out = base64_decode(text);
    if (!out)
      auth_error_ = "501 5.5.2 Error: cannot decode response";
    return out;
  }

  std::optional<std::pair<std::string, std::string>> auth_plain(
    const std::optional<std::string>& initial) {
    auto msg = initial ? decode(*initial) : challenge("");
    if (!msg)
      return std::nullopt;
    // authzid NUL authcid NUL passwd (RFC 4616)
    auto a = msg->find('\0');
    auto b = a == std::string::npos ? a : msg->find('\0', a + 1);
    if (b == std::string::npos) {
      auth_error_ = "501 5.5.2 Error: malformed PLAIN response";
      return std::nullopt;
    }
    return std::make_pair(msg->substr(a + 1, b - a - 1), msg->substr(b + 1));
  }

  std::optional<std::pair<std::string, std::string>> auth_login(
    const std::optional<std::string>& initial) {
    auto user = initial ? decode(*initial)
                        : challenge(base64_encode("Username:"));
    if (!user)
      return std::nullopt;
    auto pass = challenge(base64_encode("Password:"));
    if (!pass)
      return std::nullopt;
    return std::make_pair(*user, *pass);
  }

  bool mail(const std::string& arg) {
    if (helo_.empty())
      return reply("503 5.5.1 Error: send HELO/EHLO first");
    if (in_mail_)
      return reply("503 5.5.1 Error: nested MAIL command");
    if (opts_.require_auth && auth_user_.empty())
      return reply("530 5.7.0 Authentication required");
    if (upper(arg.substr(0, 5)) != "FROM:")
      return reply("501 5.5.4 Syntax: MAIL FROM:<address>");
    auto path = parse_path(arg.substr(5));
    if (!path)
      return reply("501 5.1.7 Bad sender address syntax");
    auto size = size_param(path->second);
    if (size && *size > opts_.max_size)
      return reply("552 5.3.4 Message size exceeds fixed limit");
    in_mail_ = true;
    from_ = path->first;
    params_ = path->second;
    fault_ = sink_.take_fault();
    return reply("250 2.1.0 Ok");
  }

  bool rcpt(const std::string& arg) {
    if (!in_mail_)
      return reply("503 5.5.1 Error: need MAIL command");
    if (upper(arg.substr(0, 3)) != "TO:")
      return reply("501 5.5.4 Syntax: RCPT TO:<address>");
    auto path = parse_path(arg.substr(3));
    if (!path || path->first.empty())
      return reply("501 5.1.3 Bad recipient address syntax");
    if (fault_ && fault_->at == smtp_fault::stage::rcpt)
      return reply(std::to_string(fault_->code) + " " + fault_->text);
    rcpts_.push_back(path->first);
    return reply("250 2.1.5 Ok");
  }

  bool data() {
    if (!in_mail_)
      return reply("503 5.5.1 Error: need MAIL command");
    if (rcpts_.empty())
      return reply(fault_ ? "554 5.5.1 Error: no valid recipients"
                          : "503 5.5.1 Error: need RCPT command");
    if (!reply("354 End data with <CR><LF>.<CR><LF>"))
      return false;
    std::string content;
    bool too_big = false;
    for (;;) {
      auto line = read_line();
      if (!line)
        return false;
      if (*line == ".")
        break;
      auto text = unstuff(*line);
      if (content.size() + text.size() + 2 > opts_.max_size)
        too_big = true;
      if (!too_big) {
        content += text;
        content += "\r\n";
      }
    }
    auto fault = fault_;
    smtp_received msg{helo_, auth_user_, from_, params_, rcpts_, {}, {}, {}};
    reset();
    if (too_big)
      return reply("552 5.3.4 Message size exceeds fixed limit");
    if (fault && fault->at == smtp_fault::stage::data)
      return reply(std::to_string(fault->code) + " " + fault->text);
    msg.headers = parse_headers(content);
    msg.data = std::move(content);
    msg.at = std::chrono::steady_clock::now();
    sink_.record_message(std::move(msg));
    return reply("250 2.0.0 Ok: queued as " + std::to_string(++queued_));
  }

  void reset() {
    in_mail_ = false;
    from_.clear();
    params_.clear();
    rcpts_.clear();
    fault_.reset();
  }

  bool reply(const std::string& text) {
    return conn_.write_all(text + "\r\n");
  }

  /// The next line without its line end (CRLF, or a bare LF); nullopt when
  /// the connection ends first.
  std::optional<std::string> read_line() {
    for (;;) {
      auto lf = buf_.find('\n', scanned_);
      if (lf != std::string::npos) {
        auto end = lf > 0 && buf_[lf - 1] == '\r' ? lf - 1 : lf;
        std::string line = buf_.substr(0, end);
        buf_.erase(0, lf + 1);
        scanned_ = 0;
        return line;
      }
      scanned_ = buf_.size();
      if (!conn_.read_some(buf_))
        return std::nullopt;
    }
  }

  smtp_sink& sink_;
  const smtp_sink_options& opts_;
  loopback_connection& conn_;
  std::string buf_;
  size_t scanned_ = 0;
  std::string helo_;
  std::string auth_user_;
  std::string auth_error_;
  bool closed_ = false;
  bool in_mail_ = false;
  std::string from_;
  std::string params_;
  std::vector<std::string> rcpts_;
  std::optional<smtp_fault> fault_;
  size_t queued_ = 0;
};

// -- the sink
// --------------------------------------------------------------------

smtp_sink::smtp_sink(smtp_sink_options options)
  : options_(std::move(options)), server_([this](loopback_connection& conn) {
      serve(conn);
    }) {
  // nop
}

smtp_sink::~smtp_sink() {
  server_.stop();
}

void smtp_sink::serve(loopback_connection& conn) {
  smtp_session{*this, conn}.run();
}

std::string smtp_sink::url() const {
  return "smtp://127.0.0.1:" + std::to_string(port());
}

void smtp_sink::inject(smtp_fault fault, int transactions) {
  std::lock_guard<std::mutex> guard{mtx_};
  for (int i = 0; i < transactions; ++i)
    faults_.push_back(fault);
}

size_t smtp_sink::pending_faults() const {
  std::lock_guard<std::mutex> guard{mtx_};
  return faults_.size();
}

std::optional<smtp_fault> smtp_sink::take_fault() {
  std::lock_guard<std::mutex> guard{mtx_};
  if (faults_.empty())
    return std::nullopt;
  auto f = faults_.front();
  faults_.pop_front();
  return f;
}

void smtp_sink::record_message(smtp_received msg) {
  {
    std::lock_guard<std::mutex> guard{mtx_};
    messages_.push_back(std::move(msg));
  }
  changed_.notify_all();
}

void smtp_sink::record_auth(smtp_auth_attempt a) {
  std::lock_guard<std::mutex> guard{mtx_};
  auths_.push_back(std::move(a));
}

void smtp_sink::record_command(std::string line) {
  std::lock_guard<std::mutex> guard{mtx_};
  commands_.push_back(std::move(line));
}

std::vector<smtp_received> smtp_sink::messages() const {
  std::lock_guard<std::mutex> guard{mtx_};
  return messages_;
}

size_t smtp_sink::message_count() const {
  std::lock_guard<std::mutex> guard{mtx_};
  return messages_.size();
}

bool smtp_sink::wait_for_messages(size_t n,
                                  std::chrono::milliseconds timeout) const {
  std::unique_lock<std::mutex> guard{mtx_};
  return changed_.wait_for(guard, timeout, [&] {
    return messages_.size() >= n;
  });
}

std::vector<smtp_auth_attempt> smtp_sink::auth_attempts() const {
  std::lock_guard<std::mutex> guard{mtx_};
  return auths_;
}

std::vector<std::string> smtp_sink::commands() const {
  std::lock_guard<std::mutex> guard{mtx_};
  return commands_;
}

// -- base64
// ----------------------------------------------------------------------

std::string base64_encode(std::string_view data) {
  std::string out;
  out.reserve((data.size() + 2) / 3 * 4);
  for (size_t i = 0; i < data.size(); i += 3) {
    uint32_t n = static_cast<uint8_t>(data[i]) << 16;
    if (i + 1 < data.size())
      n |= static_cast<uint8_t>(data[i + 1]) << 8;
    if (i + 2 < data.size())
      n |= static_cast<uint8_t>(data[i + 2]);
    out += b64_alphabet[(n >> 18) & 63];
    out += b64_alphabet[(n >> 12) & 63];
    out += i + 1 < data.size() ? b64_alphabet[(n >> 6) & 63] : '=';
    out += i + 2 < data.size() ? b64_alphabet[n & 63] : '=';
  }
  return out;
}

std::optional<std::string> base64_decode(std::string_view text) {
  if (text.size() % 4 != 0)
    return std::nullopt;
  std::string out;
  for (size_t i = 0; i < text.size(); i += 4) {
    uint32_t n = 0;
    int pad = 0;
    for (size_t j = 0; j < 4; ++j) {
      char c = text[i + j];
      uint32_t v = 0;
      if (c == '=' && i + 4 == text.size() && j >= 2) {
        ++pad;
      } else {
        auto at = b64_alphabet.find(c);
        if (at == std::string_view::npos || pad > 0)
          return std::nullopt;
        v = static_cast<uint32_t>(at);
      }
      n = (n << 6) | v;
    }
    out += static_cast<char>((n >> 16) & 0xff);
    if (pad < 2)
      out += static_cast<char>((n >> 8) & 0xff);
    if (pad < 1)
      out += static_cast<char>(n & 0xff);
  }
  return out;
}

} // namespace butlers::test
