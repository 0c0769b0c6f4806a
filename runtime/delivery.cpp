#include "runtime/delivery.hpp"

#include <algorithm>
#include <mutex>

#include "runtime/json.hpp"
#include "runtime/outbox.hpp"
#include "runtime/slack_adapter.hpp"
#include "runtime/telegram_adapter.hpp"
#include "runtime/webhook.hpp"

namespace butlers {

namespace {

/// Services for adapters that need none (`post`): every call fails.
class no_services final : public delivery_services {
 public:
  source_lookup source_payload(const std::string&) override {
    return {false, "no delivery services here", false, {}};
  }
  ledger_claim ledger_begin(const outbound_send&) override {
    ledger_claim c;
    c.error = "no outbound ledger here";
    return c;
  }
  ledger_mark ledger_end(const outbound_send&, ledger_state,
                         const std::string&) override {
    ledger_mark m;
    m.error = "no outbound ledger here";
    return m;
  }
  bool ledger_dead(const outbound_send&, const std::string&,
                   const std::string&) override {
    return false;
  }
};

/// The line an outbox stores for `notify`.
std::string outbox_line(const std::string& notify) {
  return R"({"notify":)" + notify + "}";
}

} // namespace

// -- delivery_adapter ---------------------------------------------------------

delivery_adapter::delivery_adapter(delivery_adapter_config cfg)
  : cfg_(std::move(cfg)) {
  // nop
}

delivery_adapter::~delivery_adapter() = default;

bool delivery_adapter::serves(std::string_view channel) const {
  // A chat adapter delivers for its own channel only ("*" means that, as
  // config/README.md says): a telegram adapter has no chat to send a Slack
  // reply to, nor a slack adapter a Telegram one.
  if ((cfg_.kind == adapter_kind::telegram && channel != "telegram")
      || (cfg_.kind == adapter_kind::slack && channel != "slack"))
    return false;
  return std::any_of(cfg_.channels.begin(), cfg_.channels.end(),
                     [&](const std::string& c) {
                       return c == "*" || c == channel;
                     });
}

bool delivery_adapter::nonblocking() const {
  return false;
}

bool delivery_adapter::reacts() const {
  return false;
}

void delivery_adapter::post(const notify_view& view, const std::string& notify,
                            std::function<void(delivery_attempt)> done) const {
  no_services none;
  std::string no_lineage;
  done(deliver({view, notify, no_lineage, no_lineage, none, nullptr}));
}

// -- webhook_adapter ----------------------------------------------------------

delivery_attempt webhook_adapter::deliver(const delivery_context& dc) const {
  auto& view = dc.view;
  auto& notify = dc.notify;
  auto stop = dc.stop;
  delivery_attempt a;
  auto url = parse_http_url(cfg_.url, &a.error);
  if (!url)
    return a;
  webhook_policy policy;
  policy.timeout = std::chrono::milliseconds{cfg_.timeout_ms};
  policy.retries = cfg_.retries;
  policy.token = cfg_.token;
  auto out = deliver_webhook(*url, notify, view.idempotency_key, policy, stop);
  if (!out.delivered) {
    a.error = "webhook " + cfg_.url + ": " + out.error;
    a.retryable = out.retryable;
  }
  return a;
}

// -- outbox_adapter -----------------------------------------------------------

bool outbox_adapter::nonblocking() const {
  return true;
}

delivery_attempt outbox_adapter::deliver(const delivery_context& dc) const {
  return {append_outbox_line(cfg_.path, outbox_line(dc.notify)), false, {}};
}

void outbox_adapter::post(const notify_view&, const std::string& notify,
                          std::function<void(delivery_attempt)> done) const {
  auto line = outbox_line(notify);
  auto posted = append_outbox_line_async(cfg_.path, line,
                                         [done](std::string error) {
                                           done({std::move(error), false, {}});
                                         });
  // A full queue passes; a write that failed is not retried (as a
  // webhook's refusal is not).
  if (posted == outbox_post::full)
    done({cfg_.path + ": " + std::to_string(outbox_max_queued)
            + " lines already wait to be written",
          true, "overload_rejected"});
  else if (posted == outbox_post::invalid)
    done({outbox_line_error(cfg_.path, line), false, {}});
}

// -- plans --------------------------------------------------------------------

delivery_adapter_ptr make_delivery_adapter(
  const delivery_adapter_config& cfg,
  const std::vector<connector_config>& connectors) {
  switch (cfg.kind) {
    case adapter_kind::webhook: return std::make_shared<webhook_adapter>(cfg);
    case adapter_kind::telegram: {
      telegram_endpoint ep;
      for (auto& cn : connectors)
        if (cn.name == cfg.connector) {
          ep.api_base = cn.api_base;
          ep.token = cn.token;
        }
      return std::make_shared<telegram_adapter>(cfg, std::move(ep));
    }
    case adapter_kind::slack: {
      slack_endpoint ep;
      for (auto& cn : connectors)
        if (cn.name == cfg.connector) {
          ep.api_base = slack_api_base(cn);
          ep.token = cn.token;
        }
      return std::make_shared<slack_adapter>(cfg, std::move(ep));
    }
    case adapter_kind::smtp: return std::make_shared<smtp_adapter>(cfg);
    case adapter_kind::outbox: break;
  }
  return std::make_shared<outbox_adapter>(cfg);
}

std::vector<delivery_adapter_ptr> make_delivery_adapters(
  const std::vector<delivery_adapter_config>& configured,
  const std::vector<connector_config>& connectors) {
  std::vector<delivery_adapter_ptr> out;
  if (configured.empty()) {
    delivery_adapter_config outbox;
    outbox.kind = adapter_kind::outbox;
    outbox.path = "outbox.jsonl";
    out.push_back(make_delivery_adapter(outbox));
  }
  for (auto& cfg : configured)
    out.push_back(make_delivery_adapter(cfg, connectors));
  return out;
}

bool delivery_plan::nonblocking() const {
  return std::all_of(adapters.begin(), adapters.end(),
                     [](const delivery_adapter_ptr& ad) {
                       return ad->nonblocking();
                     });
}

std::variant<delivery_plan, adapter_result> plan_delivery(
  const std::vector<delivery_adapter_ptr>& adapters,
  const std::string& notify) {
  adapter_result a;
  auto view = read_notify(notify);
  if (!view) {
    a.error_class = "validation_error";
    a.message = "notify_request is not a notify.v1 document";
    return a;
  }
  delivery_plan plan;
  bool react = view->intent == "react";
  bool served = false;
  for (auto& ad : adapters) {
    if (!ad->serves(view->channel))
      continue;
    served = true;
    if (!react || ad->reacts())
      plan.adapters.push_back(ad);
  }
  if (served && plan.adapters.empty()) {
    // Only channels with an adapter that reacts are sent reactions; one
    // may still arrive from a node configured otherwise.
    a.ok = true;
    a.text = R"({"notify_response":{"delivered":false,"channel":)"
             + json::quote(view->channel)
             + R"(,"reason":"no adapter of the channel sets reactions"}})";
    return a;
  }
  if (plan.adapters.empty()) {
    a.error_class = "validation_error";
    a.message = "no messenger adapter serves channel '" + view->channel + "'";
    return a;
  }
  plan.view = std::move(*view);
  return plan;
}

adapter_result delivery_result(const delivery_plan& plan,
                               const std::vector<delivery_attempt>& attempts) {
  adapter_result a;
  std::string report = "[";
  for (size_t i = 0; i < attempts.size(); ++i) {
    auto& at = attempts[i];
    if (i > 0)
      report += ',';
    report += R"({"kind":)"
              + json::quote(to_string(plan.adapters[i]->config().kind))
              + R"(,"delivered":)" + (at.error.empty() ? "true" : "false")
              + '}';
    if (!at.error.empty()) {
      a.error_class = at.error_class.empty() ? "target_unavailable"
                                             : at.error_class;
      a.message = at.error;
      a.retryable = std::any_of(attempts.begin(), attempts.end(),
                                [](const delivery_attempt& x) {
                                  return x.retryable;
                                });
      return a;
    }
  }
  report += ']';
  a.ok = true;
  a.text = R"({"notify_response":{"delivered":true,"channel":)"
           + json::quote(plan.view.channel) + R"(,"adapters":)" + report + "}}";
  return a;
}

adapter_result deliver_blocking(const delivery_plan& plan,
                                const std::string& notify,
                                const std::string& request_id,
                                const std::string& segment_id,
                                delivery_services& services,
                                const std::atomic<bool>* stop) {
  std::vector<delivery_attempt> attempts;
  delivery_context dc{plan.view,  notify,   request_id,
                      segment_id, services, stop};
  for (auto& ad : plan.adapters) {
    attempts.push_back(ad->deliver(dc));
    if (!attempts.back().error.empty())
      break;
  }
  return delivery_result(plan, attempts);
}

void deliver_nonblocking(delivery_plan plan, const std::string& notify,
                         std::function<void(adapter_result)> done) {
  struct pending {
    delivery_plan plan;
    std::function<void(adapter_result)> done;
    std::mutex mtx;
    std::vector<delivery_attempt> attempts;
    size_t left = 0;
  };
  auto p = std::make_shared<pending>();
  p->attempts.resize(plan.adapters.size());
  p->left = plan.adapters.size();
  p->plan = std::move(plan);
  p->done = std::move(done);
  for (size_t i = 0; i < p->plan.adapters.size(); ++i) {
    p->plan.adapters[i]->post(p->plan.view, notify, [p, i](delivery_attempt a) {
      std::unique_lock<std::mutex> guard{p->mtx};
      p->attempts[i] = std::move(a);
      if (--p->left > 0)
        return;
      guard.unlock();
      p->done(delivery_result(p->plan, p->attempts));
    });
  }
}

} // namespace butlers
