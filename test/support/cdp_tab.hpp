#pragma once

// A tab of headless Chromium driven over the DevTools protocol
// (cdp_client): evaluate in the page, wait for a condition, set the
// viewport, take screenshots, and collect the console errors. The browser
// tests of the dashboard and the chat use it.

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include <rapidjson/document.h>

#include "runtime/json.hpp"
#include "test/support/cdp_client.hpp"
#include "test/support/poll.hpp"

namespace butlers::test {

inline std::string chromium_path() {
  auto* env = std::getenv("BUTLERS_CHROMIUM");
  return env && *env ? env : "/usr/bin/chromium";
}

/// One browser tab attached over a flat CDP session.
class tab {
 public:
  tab(cdp_client& c, std::string session)
    : c_(c), session_(std::move(session)) {
    // nop
  }

  /// Runs `expr` in the page (awaiting a promise) and returns its value as
  /// JSON, or "" when it threw or no answer came.
  std::string eval(const std::string& expr) {
    auto r = c_.call("Runtime.evaluate",
                     R"({"expression":)" + json::quote(expr)
                       + R"(,"returnByValue":true,"awaitPromise":true})",
                     session_);
    rapidjson::Document d;
    if (!r.ok || json::parse(r.json, d) || !d.IsObject()
        || d.HasMember("exceptionDetails") || !d.HasMember("result"))
      return {};
    auto& res = d["result"];
    return res.HasMember("value") ? json::to_string(res["value"]) : "null";
  }

  /// Polls until `expr` is true in the page.
  bool wait_for(const std::string& expr,
                std::chrono::milliseconds timeout = std::chrono::seconds{60}) {
    return eventually(
      [&] {
        return eval("!!(" + expr + ")") == "true";
      },
      timeout, std::chrono::milliseconds{100});
  }

  /// The text of the page's main element.
  std::string main_text() {
    rapidjson::Document d;
    auto v = eval("document.getElementById('main').innerText");
    if (json::parse(v, d) || !d.IsString())
      return {};
    return d.GetString();
  }

  /// Goes to hash route `hash` (e.g. "#/butlers") and waits until the page
  /// `page` has drawn.
  bool open(const std::string& hash, const std::string& page) {
    eval("location.hash = " + json::quote(hash) + "; true");
    return wait_for("document.body.dataset.page === " + json::quote(page)
                    + " && document.getElementById('main').dataset.ready "
                      "=== 'true'");
  }

  /// Clicks the element `selector` as a person does: scrolled into view, a
  /// left mouse press and release at its centre (Input.dispatchMouseEvent).
  /// False when it is not there, or something else is on top at that
  /// point (hidden, covered, off the page).
  bool click(const std::string& selector) {
    auto at = eval("(() => { const e = document.querySelector("
                   + json::quote(selector)
                   + "); if (!e) return null; e.scrollIntoView({block: "
                     "'center'}); const r = e.getBoundingClientRect(); const "
                     "x = r.left + r.width / 2, y = r.top + r.height / 2; "
                     "const top = document.elementFromPoint(x, y); return top "
                     "&& e.contains(top) ? [x, y] : null; })()");
    rapidjson::Document d;
    if (json::parse(at, d) || !d.IsArray() || d.Size() != 2)
      return false;
    auto point = R"("x":)" + json::to_string(d[0]) + R"(,"y":)"
                 + json::to_string(d[1])
                 + R"(,"button":"left","buttons":1,"clickCount":1)";
    return c_.call("Input.dispatchMouseEvent",
                   R"({"type":"mousePressed",)" + point + "}", session_)
             .ok
           && c_.call("Input.dispatchMouseEvent",
                      R"({"type":"mouseReleased",)" + point + "}", session_)
                .ok;
  }

  bool viewport(int width, int height, bool mobile) {
    return c_
      .call("Emulation.setDeviceMetricsOverride",
            R"({"width":)" + std::to_string(width) + R"(,"height":)"
              + std::to_string(height) + R"(,"deviceScaleFactor":1,"mobile":)"
              + (mobile ? "true" : "false") + "}",
            session_)
      .ok;
  }

  /// Saves a PNG of the page to `path`; its size in bytes (0: failed).
  size_t screenshot(const std::string& path) {
    auto r = c_.call("Page.captureScreenshot", R"({"format":"png"})", session_);
    rapidjson::Document d;
    if (!r.ok || json::parse(r.json, d) || !d.HasMember("data"))
      return 0;
    auto png = base64_decode(d["data"].GetString());
    std::ofstream{path, std::ios::binary} << png;
    std::cout << "screenshot: " << path << "\n";
    return png.size();
  }

  /// The console errors, exceptions and error log entries of this tab
  /// since the last `clear`.
  std::vector<std::string> errors() {
    std::vector<std::string> out;
    for (auto& e : c_.events()) {
      if (e.session != session_)
        continue;
      rapidjson::Document d;
      if (json::parse(e.params, d) || !d.IsObject())
        continue;
      if (e.method == "Runtime.exceptionThrown")
        out.push_back("exception: " + e.params);
      else if (e.method == "Runtime.consoleAPICalled"
               && std::string{d["type"].GetString()} == "error")
        out.push_back("console.error: " + e.params);
      else if (e.method == "Log.entryAdded" && d["entry"].IsObject()
               && std::string{d["entry"]["level"].GetString()} == "error")
        out.push_back("log: " + json::to_string(d["entry"]["text"]) + " "
                      + json::to_string(d["entry"]["url"]));
    }
    return out;
  }

  void clear() {
    c_.clear_events();
  }

 private:
  cdp_client& c_;
  std::string session_;
};

/// Opens a blank tab in `browser`, attached over a flat session with the
/// Page, Runtime and Log domains on; its session id in `session` ("" and
/// `why` when it failed).
inline std::string open_tab(cdp_client& browser, std::string& why) {
  auto target = browser.call("Target.createTarget", R"({"url":"about:blank"})");
  if (!target.ok) {
    why = target.json;
    return {};
  }
  rapidjson::Document td;
  json::parse(target.json, td);
  auto attach = browser.call("Target.attachToTarget",
                             R"({"targetId":)"
                               + json::quote(td["targetId"].GetString())
                               + R"(,"flatten":true})");
  if (!attach.ok) {
    why = attach.json;
    return {};
  }
  rapidjson::Document ad;
  json::parse(attach.json, ad);
  std::string session = ad["sessionId"].GetString();
  for (auto domain : {"Page.enable", "Runtime.enable", "Log.enable"})
    if (!browser.call(domain, "{}", session).ok) {
      why = std::string{domain} + " failed";
      return {};
    }
  return session;
}

} // namespace butlers::test
