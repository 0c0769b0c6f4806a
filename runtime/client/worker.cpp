#include "runtime/client/worker.hpp"

#include <condition_variable>
#include <mutex>
#include <thread>

#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include "runtime/interruptible_sleep.hpp"
#include "runtime/subprocess.hpp"

namespace butlers::client {

namespace {

using std::chrono::milliseconds;

std::string quote(const std::string& s) {
  rapidjson::StringBuffer buf;
  rapidjson::Writer<rapidjson::StringBuffer> w{buf};
  w.String(s.data(), static_cast<rapidjson::SizeType>(s.size()));
  return buf.GetString();
}

std::string compact(const rapidjson::Value& v) {
  rapidjson::StringBuffer buf;
  rapidjson::Writer<rapidjson::StringBuffer> w{buf};
  v.Accept(w);
  return buf.GetString();
}

std::string text_of(const rapidjson::Value& obj, const char* key) {
  auto i = obj.FindMember(key);
  if (i == obj.MemberEnd() || !i->value.IsString())
    return {};
  return {i->value.GetString(), i->value.GetStringLength()};
}

} // namespace

std::optional<std::vector<work_delivery>> parse_deliveries(
  const std::string& body, std::string* error) {
  rapidjson::Document doc;
  doc.Parse(body.data(), body.size());
  const rapidjson::Value* items = nullptr;
  if (!doc.HasParseError() && doc.IsObject()) {
    auto i = doc.FindMember("items");
    if (i != doc.MemberEnd() && i->value.IsArray())
      items = &i->value;
  }
  if (items == nullptr) {
    if (error)
      *error = "not a recv answer: " + body.substr(0, 200);
    return std::nullopt;
  }
  std::vector<work_delivery> out;
  for (auto& it : items->GetArray()) {
    if (!it.IsObject())
      continue;
    work_delivery d;
    d.work_id = text_of(it, "work_id");
    d.lease_token = text_of(it, "lease_token");
    auto a = it.FindMember("attempt");
    if (a != it.MemberEnd() && a->value.IsUint())
      d.attempt = a->value.GetUint();
    auto env = it.FindMember("envelope");
    if (env != it.MemberEnd() && env->value.IsObject()) {
      d.envelope = compact(env->value);
      auto rc = env->value.FindMember("request_context");
      if (rc != env->value.MemberEnd() && rc->value.IsObject())
        d.request_id = text_of(rc->value, "request_id");
    }
    out.push_back(std::move(d));
  }
  return out;
}

std::string ack_body(const work_delivery& d, const std::string& out,
                     double duration_ms) {
  auto head = R"({"lease_token":)" + quote(d.lease_token) + R"(,"response":)";
  rapidjson::Document doc;
  doc.Parse(out.data(), out.size());
  if (!doc.HasParseError() && doc.IsObject()
      && text_of(doc, "schema_version") == "route_response.v1")
    return head + compact(doc) + "}";
  auto text = out;
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r'))
    text.pop_back();
  std::string result = text.empty() ? "{}" : R"({"reply":)" + quote(text) + "}";
  return head + R"({"schema_version":"route_response.v1",)"
         + R"("request_context":{"request_id":)" + quote(d.request_id)
         + R"(},"status":"ok","result":)" + result
         + R"(,"timing":{"duration_ms":)"
         + std::to_string(duration_ms < 0 ? 0 : duration_ms) + "}}}";
}

worker::worker(std::shared_ptr<transport> t, worker_options o)
  : transport_(std::move(t)), opt_(std::move(o)) {
  // nop
}

void worker::log(const std::string& event, const std::string& work_id,
                 const std::string& detail) {
  if (!opt_.log)
    return;
  opt_.log(R"({"event":)" + quote(event) + R"(,"butler":)" + quote(opt_.butler)
           + R"(,"work_id":)" + quote(work_id) + R"(,"detail":)" + quote(detail)
           + "}");
}

response worker::post(const std::string& path, const std::string& body,
                      const std::atomic<bool>& cancel) {
  request req;
  req.path = "/v1/butlers/" + opt_.butler + "/work/" + path;
  req.body = body;
  return transport_->perform(req, cancel);
}

void worker::run(const std::atomic<bool>& stop) {
  std::vector<std::thread> loops;
  for (size_t i = 0; i < std::max<size_t>(opt_.concurrency, 1); ++i)
    loops.emplace_back([this, &stop] {
      loop(stop);
    });
  for (auto& t : loops)
    t.join();
}

void worker::loop(const std::atomic<bool>& stop) {
  auto body = R"({"max":1,"visibility_ms":)"
              + std::to_string(opt_.visibility.count()) + R"(,"wait_ms":)"
              + std::to_string(opt_.wait.count()) + "}";
  milliseconds backoff{250};
  while (!stop) {
    auto r = post("recv", body, stop);
    if (stop)
      break;
    std::string error;
    auto items = r.status == 200 ? parse_deliveries(r.body, &error)
                                 : std::nullopt;
    if (!items) {
      // 429/503 say when; anything else (node away, 4xx) backs off.
      log("recv_failed", {},
          r.transport_error ? r.error
                            : std::to_string(r.status) + " " + r.body);
      sleep_unless_stopped(r.retry_after ? *r.retry_after : backoff, &stop);
      backoff = std::min(backoff * 2, milliseconds{5000});
      continue;
    }
    backoff = milliseconds{250};
    for (auto& d : *items) {
      ++counts_.received;
      log("received", d.work_id, "attempt " + std::to_string(d.attempt));
      process(d);
    }
  }
}

void worker::process(const work_delivery& d) {
  subprocess_options so;
  so.argv = opt_.argv;
  so.stdin_data = d.envelope;
  so.env = {{"BUTLERS_WORK_ID", d.work_id},
            {"BUTLERS_ATTEMPT", std::to_string(d.attempt)},
            {"BUTLERS_BUTLER", opt_.butler}};
  so.timeout = opt_.command_timeout;
  so.max_output_bytes = opt_.max_output_bytes;
  auto t0 = std::chrono::steady_clock::now();
  subprocess child{std::move(so)};
  std::mutex mtx;
  std::condition_variable cv;
  bool done = false;
  subprocess_result result;
  std::thread waiter{[&] {
    auto r = child.wait();
    std::lock_guard<std::mutex> guard{mtx};
    result = std::move(r);
    done = true;
    cv.notify_all();
  }};
  // Extend at a third of the visibility while the command runs.
  auto every = std::max(opt_.visibility / 3, milliseconds{100});
  auto ext = R"({"lease_token":)" + quote(d.lease_token)
             + R"(,"visibility_ms":)" + std::to_string(opt_.visibility.count())
             + "}";
  bool lost = false;
  std::atomic<bool> never{false};
  {
    std::unique_lock<std::mutex> lock{mtx};
    while (!cv.wait_for(lock, every, [&] {
      return done;
    })) {
      lock.unlock();
      auto r = post(d.work_id + "/extend", ext, never);
      lock.lock();
      if (r.status == 409) {
        lost = true;
        child.cancel();
      }
    }
  }
  waiter.join();
  if (lost) {
    ++counts_.lost;
    log("lost", d.work_id, "extend answered 409");
    return;
  }
  using ms = std::chrono::duration<double, std::milli>;
  auto took = ms{std::chrono::steady_clock::now() - t0}.count();
  response r;
  bool ok = result.outcome == subprocess_outcome::exited
            && result.exit_code == 0;
  if (ok) {
    r = post(d.work_id + "/ack", ack_body(d, result.out, took), never);
  } else {
    auto why = std::string{to_string(result.outcome)} + " (exit "
               + std::to_string(result.exit_code) + "): " + result.err
               + result.error;
    if (why.size() > 4000)
      why.erase(0, why.size() - 4000);
    r = post(d.work_id + "/nack",
             R"({"lease_token":)" + quote(d.lease_token)
               + R"(,"retryable":true,"error":)" + quote(why) + "}",
             never);
  }
  if (r.status == 200) {
    ++(ok ? counts_.acked : counts_.nacked);
    log(ok ? "acked" : "nacked", d.work_id, r.body);
  } else if (r.status == 409) {
    ++counts_.lost;
    log("lost", d.work_id, r.body);
  } else {
    log(ok ? "ack_failed" : "nack_failed", d.work_id,
        r.transport_error ? r.error : std::to_string(r.status) + " " + r.body);
  }
}

} // namespace butlers::client
