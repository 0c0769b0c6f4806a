#include "test/support/fake_model_server.hpp"

#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>
#include <utility>

#include "runtime/attachments.hpp"
#include "runtime/json.hpp"
#include "test/support/loopback_http.hpp"

namespace butlers::test {

struct fake_model_server::state {
  mutable std::mutex mtx;
  std::deque<fake_model_reply> queue;
  fake_model_reply fallback;
  std::vector<fake_model_call> calls;
};

namespace {

using clock = std::chrono::steady_clock;

std::string lower(std::string s) {
  for (auto& c : s)
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string trim(const std::string& s) {
  auto b = s.find_first_not_of(" \t");
  auto e = s.find_last_not_of(" \t\r");
  return b == std::string::npos ? std::string{} : s.substr(b, e - b + 1);
}

/// Reads one request from `conn` (buffered in `buf`); false when the
/// connection ended first.
bool read_request(loopback_connection& conn, std::string& buf,
                  fake_model_call& out) {
  size_t end;
  while ((end = buf.find("\r\n\r\n")) == std::string::npos)
    if (!conn.read_some(buf))
      return false;
  std::istringstream head{buf.substr(0, end)};
  std::string line;
  std::getline(head, line);
  std::istringstream request_line{line};
  request_line >> out.method >> out.path;
  size_t length = 0;
  while (std::getline(head, line)) {
    auto colon = line.find(':');
    if (colon == std::string::npos)
      continue;
    auto name = lower(line.substr(0, colon));
    auto value = trim(line.substr(colon + 1));
    if (name == "content-length")
      length = std::stoul(value);
    out.headers[name] = value;
  }
  buf.erase(0, end + 4);
  while (buf.size() < length)
    if (!conn.read_some(buf))
      return false;
  out.body = buf.substr(0, length);
  buf.erase(0, length);
  return true;
}

/// Waits `d` unless the client closes the connection first (false).
bool wait_unless_closed(loopback_connection& conn,
                        std::chrono::milliseconds d) {
  auto until = clock::now() + d;
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
      until - clock::now());
    pollfd p{conn.fd(), POLLIN | POLLRDHUP, 0};
    int n = ::poll(&p, 1, static_cast<int>(std::max<int64_t>(left.count(), 0)));
    if (n > 0) {
      char c;
      auto got = ::recv(conn.fd(), &c, 1, MSG_PEEK | MSG_DONTWAIT);
      if (got <= 0 || (p.revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0)
        return false;
      // Bytes from the client mid-reply: not expected; keep waiting.
      std::this_thread::sleep_for(std::chrono::milliseconds{5});
    }
    if (clock::now() >= until)
      return true;
  }
}

std::string chunk(const std::string& data) {
  char size[32];
  std::snprintf(size, sizeof(size), "%zx\r\n", data.size());
  return size + data + "\r\n";
}

} // namespace

void read_tool_traffic(const std::string& api, fake_model_call& call) {
  rapidjson::Document doc;
  if (json::parse(call.body, doc) || !doc.IsObject())
    return;
  auto str = [](const rapidjson::Value& v, const char* name) {
    return v.IsObject() && v.HasMember(name) && v[name].IsString()
             ? std::string{v[name].GetString()}
             : std::string{};
  };
  if (doc.HasMember("tools") && doc["tools"].IsArray())
    for (auto& t : doc["tools"].GetArray())
      call.tools.push_back(api == "openai" && t.HasMember("function")
                             ? str(t["function"], "name")
                             : str(t, "name"));
  if (!doc.HasMember("messages") || !doc["messages"].IsArray())
    return;
  for (auto& m : doc["messages"].GetArray()) {
    if (!m.IsObject())
      continue;
    auto role = str(m, "role");
    if (api == "openai") {
      if (role == "tool")
        call.tool_results.push_back(
          {str(m, "tool_call_id"), str(m, "content"), false});
      if (role == "assistant" && m.HasMember("tool_calls")
          && m["tool_calls"].IsArray())
        for (auto& c : m["tool_calls"].GetArray())
          call.tool_call_ids.push_back(str(c, "id"));
      continue;
    }
    if (!m.HasMember("content") || !m["content"].IsArray())
      continue;
    for (auto& b : m["content"].GetArray()) {
      auto type = str(b, "type");
      if (type == "tool_use")
        call.tool_call_ids.push_back(str(b, "id"));
      if (type == "tool_result")
        call.tool_results.push_back({str(b, "tool_use_id"), str(b, "content"),
                                     b.HasMember("is_error")
                                       && b["is_error"].IsBool()
                                       && b["is_error"].GetBool()});
    }
  }
}

namespace {

/// "<part> <type> sha256=... bytes=N" of base64 `data`.
std::string file_line(const std::string& part, const std::string& type,
                      const std::string& data) {
  auto bytes = base64_decode(data);
  return part + " " + type
         + " sha256=" + (bytes ? attachment_hash(*bytes) : "(not base64)")
         + " bytes=" + std::to_string(bytes ? bytes->size() : 0);
}

/// A data URL's media type and base64 data ("" when not one).
std::pair<std::string, std::string> data_url(const std::string& url) {
  auto comma = url.find(";base64,");
  if (url.rfind("data:", 0) != 0 || comma == std::string::npos)
    return {};
  return {url.substr(5, comma - 5), url.substr(comma + 8)};
}

} // namespace

void read_files(fake_model_call& call) {
  rapidjson::Document doc;
  json::parse_limits limits;
  limits.max_bytes = call.body.size() + 1;
  if (json::parse(call.body, doc, limits) || !doc.IsObject()
      || !doc.HasMember("messages") || !doc["messages"].IsArray())
    return;
  auto str = [](const rapidjson::Value& v, const char* name) {
    return v.IsObject() && v.HasMember(name) && v[name].IsString()
             ? std::string{v[name].GetString()}
             : std::string{};
  };
  for (auto& m : doc["messages"].GetArray()) {
    if (!m.IsObject() || !m.HasMember("content") || !m["content"].IsArray())
      continue;
    for (auto& b : m["content"].GetArray()) {
      auto type = str(b, "type");
      if (type == "image_url" && b.HasMember("image_url")) {
        auto [media, data] = data_url(str(b["image_url"], "url"));
        call.files.push_back(file_line(type, media, data));
      } else if (type == "file" && b.HasMember("file")) {
        auto [media, data] = data_url(str(b["file"], "file_data"));
        call.files.push_back(file_line(type, media, data));
      } else if ((type == "image" || type == "document")
                 && b.HasMember("source")) {
        call.files.push_back(file_line(type, str(b["source"], "media_type"),
                                       str(b["source"], "data")));
      }
    }
  }
}

std::vector<std::string> model_fixture_events(const std::string& api,
                                              const std::string& file) {
  std::ifstream in{std::string{BUTLERS_MODEL_FIXTURES} + "/" + api + "/" + file,
                   std::ios::binary};
  if (!in)
    throw std::runtime_error{"no fixture " + api + "/" + file};
  std::stringstream ss;
  ss << in.rdbuf();
  auto text = ss.str();
  std::vector<std::string> events;
  size_t pos = 0;
  while (pos < text.size()) {
    auto end = text.find("\n\n", pos);
    if (end == std::string::npos) {
      events.push_back(text.substr(pos));
      break;
    }
    events.push_back(text.substr(pos, end + 2 - pos));
    pos = end + 2;
  }
  return events;
}

fake_model_server::fake_model_server() : st_(std::make_shared<state>()) {
  server_ = std::make_unique<loopback_server>([this](loopback_connection& c) {
    serve(c);
  });
}

fake_model_server::~fake_model_server() {
  server_->stop();
}

std::string fake_model_server::base_url() const {
  return "http://127.0.0.1:" + std::to_string(server_->port());
}

void fake_model_server::push(fake_model_reply r) {
  std::lock_guard<std::mutex> guard{st_->mtx};
  st_->queue.push_back(std::move(r));
}

void fake_model_server::push_tool_round(const std::string& api,
                                        std::string fixture) {
  fake_model_reply r;
  r.fixture = !fixture.empty()  ? std::move(fixture)
              : api == "openai" ? "tool_calls_butler.sse"
                                : "tool_use_butler.sse";
  push(std::move(r));
}

void fake_model_server::set_default(fake_model_reply r) {
  std::lock_guard<std::mutex> guard{st_->mtx};
  st_->fallback = std::move(r);
}

std::vector<fake_model_call> fake_model_server::calls() const {
  std::lock_guard<std::mutex> guard{st_->mtx};
  return st_->calls;
}

size_t fake_model_server::call_count() const {
  std::lock_guard<std::mutex> guard{st_->mtx};
  return st_->calls.size();
}

void fake_model_server::serve(loopback_connection& conn) {
  std::string buf;
  for (;;) {
    fake_model_call call;
    if (!read_request(conn, buf, call))
      return;
    call.received = clock::now();
    if (call.path == "/v1/chat/completions")
      call.api = "openai";
    else if (call.path == "/v1/messages")
      call.api = "anthropic";
    if (!call.api.empty()) {
      read_tool_traffic(call.api, call);
      read_files(call);
    }
    fake_model_reply reply;
    size_t index;
    {
      std::lock_guard<std::mutex> guard{st_->mtx};
      if (!call.api.empty() && !st_->queue.empty()) {
        reply = std::move(st_->queue.front());
        st_->queue.pop_front();
      } else {
        reply = st_->fallback;
      }
      index = st_->calls.size();
      st_->calls.push_back(call);
    }
    auto finish = [&](bool client_closed, size_t events) {
      std::lock_guard<std::mutex> guard{st_->mtx};
      auto& c = st_->calls[index];
      c.ended = true;
      c.ended_at = clock::now();
      c.client_closed = client_closed;
      c.events_sent = events;
    };
    if (call.api.empty() || reply.kind == fake_model_reply::status) {
      int code = call.api.empty() ? 404 : reply.code;
      std::string body = call.api.empty()
                           ? R"({"error":{"message":"no such path"}})"
                           : reply.body;
      std::string head = "HTTP/1.1 " + std::to_string(code) + " "
                         + reason_phrase(code)
                         + "\r\nContent-Type: application/json\r\n"
                           "Content-Length: "
                         + std::to_string(body.size()) + "\r\n"
                         + (call.api.empty() ? "" : reply.headers) + "\r\n";
      bool ok = conn.write_all(head + body);
      finish(!ok, 0);
      if (!ok)
        return;
      continue;
    }
    auto file = !reply.fixture.empty() ? reply.fixture
                : call.api == "openai" ? "chat_stream.sse"
                                       : "messages_stream.sse";
    auto events = model_fixture_events(call.api, file);
    if (!conn.write_all("HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                        "Cache-Control: no-cache\r\n"
                        "Transfer-Encoding: chunked\r\n\r\n")) {
      finish(true, 0);
      return;
    }
    size_t limit = reply.kind == fake_model_reply::cut
                     ? std::min(reply.cut_after_events, events.size())
                     : events.size();
    for (size_t i = 0; i < limit; ++i) {
      if ((reply.event_interval.count() > 0
           && !wait_unless_closed(conn, reply.event_interval))
          || !conn.write_all(chunk(events[i]))) {
        finish(true, i);
        return;
      }
    }
    if (reply.kind == fake_model_reply::cut) {
      conn.shutdown();
      finish(false, limit);
      return;
    }
    bool ok = conn.write_all("0\r\n\r\n");
    finish(!ok, limit);
    if (!ok)
      return;
  }
}

} // namespace butlers::test
