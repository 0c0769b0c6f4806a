#include "runtime/delivery.hpp"

#include <algorithm>
#include <mutex>

#include "runtime/json.hpp"
#include "runtime/outbox.hpp"
#include "runtime/webhook.hpp"

namespace butlers {

namespace {

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
  return std::any_of(cfg_.channels.begin(), cfg_.channels.end(),
                     [&](const std::string& c) {
                       return c == "*" || c == channel;
                     });
}

bool delivery_adapter::nonblocking() const {
  return false;
}

void delivery_adapter::post(const notify_view& view, const std::string& notify,
                            std::function<void(delivery_attempt)> done) const {
  done(deliver(view, notify, nullptr));
}

// -- webhook_adapter ----------------------------------------------------------

delivery_attempt webhook_adapter::deliver(const notify_view& view,
                                          const std::string& notify,
                                          const std::atomic<bool>* stop) const {
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

delivery_attempt outbox_adapter::deliver(const notify_view&,
                                         const std::string& notify,
                                         const std::atomic<bool>*) const {
  return {append_outbox_line(cfg_.path, outbox_line(notify)), false};
}

void outbox_adapter::post(const notify_view&, const std::string& notify,
                          std::function<void(delivery_attempt)> done) const {
  auto line = outbox_line(notify);
  auto posted = append_outbox_line_async(cfg_.path, line,
                                         [done](std::string error) {
                                           done({std::move(error), false});
                                         });
  // A full queue passes; a write that failed is not retried (as a
  // webhook's refusal is not).
  if (posted == outbox_post::full)
    done({cfg_.path + ": " + std::to_string(outbox_max_queued)
            + " lines already wait to be written",
          true});
  else if (posted == outbox_post::invalid)
    done({outbox_line_error(cfg_.path, line), false});
}

// -- plans --------------------------------------------------------------------

delivery_adapter_ptr make_delivery_adapter(const delivery_adapter_config& cfg) {
  if (cfg.kind == adapter_kind::webhook)
    return std::make_shared<webhook_adapter>(cfg);
  return std::make_shared<outbox_adapter>(cfg);
}

std::vector<delivery_adapter_ptr> make_delivery_adapters(
  const std::vector<delivery_adapter_config>& configured) {
  std::vector<delivery_adapter_ptr> out;
  if (configured.empty()) {
    delivery_adapter_config outbox;
    outbox.kind = adapter_kind::outbox;
    outbox.path = "outbox.jsonl";
    out.push_back(make_delivery_adapter(outbox));
  }
  for (auto& cfg : configured)
    out.push_back(make_delivery_adapter(cfg));
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
  for (auto& ad : adapters)
    if (ad->serves(view->channel))
      plan.adapters.push_back(ad);
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
      a.error_class = "target_unavailable";
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
                                const std::atomic<bool>* stop) {
  std::vector<delivery_attempt> attempts;
  for (auto& ad : plan.adapters) {
    attempts.push_back(ad->deliver(plan.view, notify, stop));
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
