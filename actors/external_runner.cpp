#include "actors/external_runner.hpp"

#include <algorithm>
#include <deque>

#include <rapidjson/document.h>
#include <spdlog/spdlog.h>

#include "runtime/fanout.hpp"
#include "runtime/json.hpp"
#include "runtime/uuid.hpp"
#include "runtime/worker_queue.hpp"
#include "runtime/worker_wire.hpp"

namespace butlers {

namespace {

using std::chrono::milliseconds;
using time_point = std::chrono::steady_clock::time_point;

worker_reply ok_reply(std::string body) {
  return worker_reply{0, {}, std::move(body)};
}

worker_reply err_reply(butlers_errc code, std::string message) {
  return worker_reply{static_cast<uint8_t>(code), std::move(message), {}};
}

/// The user-facing text of an `ok` result: its string `reply`, if any.
std::string reply_of(const std::string& result) {
  rapidjson::Document doc;
  if (result.empty() || json::parse(result, doc) || !doc.IsObject())
    return {};
  auto i = doc.FindMember("reply");
  if (i == doc.MemberEnd() || !i->value.IsString())
    return {};
  return {i->value.GetString(), i->value.GetStringLength()};
}

/// What the runner keeps of an item while workers have it.
struct item_record {
  /// The route.v1 envelope (JSON text) as stored.
  std::string envelope;
  std::string request_id;
  std::string subrequest_id;
  std::string segment_id;
  /// The database lease token the butler holds it under.
  int64_t db_token = 0;
  std::vector<steer_input> steer;
  time_point since;
  /// The item's capability token for the tools ("" without tools): the
  /// workers it is delivered to use it; revoked when the item ends here.
  std::string token;
};

/// A recv waiting for items.
struct parked_recv {
  caf::typed_response_promise<worker_reply> rp;
  uint32_t max = 1;
  milliseconds visibility{0};
  time_point deadline;
};

/// An ack whose result is being written: answered once it is.
struct pending_ack {
  caf::typed_response_promise<worker_reply> rp;
  /// The duration the ack's response carries: tells its outcome from
  /// another one of the same item (a timeout or cancel before the ack).
  double duration_ms = 0;
};

class external_runner final : public work_runner {
 public:
  explicit external_runner(const butler_config& cfg)
    : cfg_(cfg),
      queue_(worker_limits{cfg.runtime.max_deliveries,
                           milliseconds{cfg.runtime.visibility_ms},
                           milliseconds{250}, milliseconds{43200000}},
             [] {
               return make_uuid_v7().to_string();
             }) {
    // nop
  }

  ~external_runner() override {
    // The butler is gone: so are its items' tokens.
    if (tokens_)
      for (auto& [id, rec] : items_)
        if (!rec.token.empty())
          tokens_->revoke(rec.token);
  }

  session_actor start(butler_ptr self, held_item& held) override {
    init(self);
    auto& it = held.item;
    item_record rec{it.envelope,
                    held.env.request_id,
                    held.env.subrequest_id,
                    held.env.segment_id,
                    it.lease_token,
                    std::move(held.steer.pending),
                    std::chrono::steady_clock::now(),
                    {}};
    auto& ctx = self->state.ctx;
    auto& cfg = self->state.params.cfg;
    if (cfg.max_tool_calls > 0) {
      session_params sp;
      sp.butler = cfg.name;
      sp.tool_base.node = self->state.params.node;
      sp.tool_base.recipients = cfg.recipients;
      sp.tool_base.max_calls = cfg.max_tool_calls;
      rec.token = ctx->tools->mint(session_scope(sp, it, held.env));
    }
    tokens_ = ctx->tools;
    items_[it.work_id] = std::move(rec);
    queue_.add(it.work_id);
    // The pool records the item as running once this returns: hand it out
    // from a message of its own.
    self->send(self, worker_atom_v, uint64_t{0});
    return {};
  }

  caf::result<worker_reply> worker(butler_ptr self,
                                   worker_call& call) override {
    init(self);
    auto now = self->clock().now();
    expire(self, now);
    switch (static_cast<worker_op>(call.op)) {
      case worker_op::recv: return recv(self, call, now);
      case worker_op::ack: return ack(self, call);
      case worker_op::nack: return nack(self, call, now);
      case worker_op::extend: return extend(call, now);
    }
    return err_reply(butlers_errc::validation_error, "unknown worker call");
  }

  void worker_timer(butler_ptr self, uint64_t gen) override {
    init(self);
    if (gen != 0) {
      if (gen != timer_gen_)
        return; // replaced by an earlier one
      timer_at_.reset();
    }
    serve(self);
  }

  void written(butler_ptr self, const session_outcome& out,
               outcome_write w) override {
    forget(out.work_id);
    auto i = acks_.find(out.work_id);
    if (i == acks_.end())
      return;
    auto p = std::move(i->second);
    acks_.erase(i);
    if (p.duration_ms != out.response.duration_ms) {
      p.rp.deliver(
        err_reply(butlers_errc::conflict,
                  "work item " + out.work_id
                    + " ended before this ack: " + out.response.error_class
                    + ": " + out.response.error_message));
    } else if (w == outcome_write::fenced) {
      p.rp.deliver(err_reply(butlers_errc::conflict,
                             "work item " + out.work_id
                               + ": its lease passed to another holder"));
    } else if (w == outcome_write::failed) {
      p.rp.deliver(err_reply(butlers_errc::database_unavailable,
                             "the result of work item " + out.work_id
                               + " was not written; it will be delivered "
                                 "again"));
    } else {
      std::string body = R"({"work_id":)" + json::quote(out.work_id)
                         + R"(,"state":)" + json::quote(out.state);
      if (out.response.status == "error")
        body += R"(,"error_class":)" + json::quote(out.response.error_class);
      p.rp.deliver(ok_reply(body + "}"));
    }
    update_gauges(self);
  }

 private:
  void init(butler_ptr self) {
    if (received_)
      return;
    auto label = "butler=\"" + cfg_.name + "\"";
    auto& m = self->state.ctx->metrics;
    received_ = &m.get_counter("butlers_worker_received_total",
                               "Items handed to external workers", label);
    acked_ = &m.get_counter("butlers_worker_acked_total",
                            "Items external workers acknowledged", label);
    nacked_ = &m.get_counter("butlers_worker_nacked_total",
                             "Items external workers gave back", label);
    expired_ = &m.get_counter("butlers_worker_expired_total",
                              "Deliveries whose visibility lapsed", label);
    dead_ = &m.get_counter("butlers_worker_dead_lettered_total",
                           "Items dead-lettered after max_deliveries", label);
    busy_ = &m.get_counter("butlers_worker_busy_rejections_total",
                           "recv answered 429: max_waiting_receivers wait",
                           label);
    waiting_ = &m.get_gauge("butlers_worker_waiting_receivers",
                            "recv calls waiting for items", label);
    in_flight_ = &m.get_gauge("butlers_worker_in_flight",
                              "Items held by external workers", label);
    ready_ = &m.get_gauge("butlers_worker_ready",
                          "Items waiting for an external worker", label);
  }

  void update_gauges(butler_ptr self) {
    if (!received_)
      return;
    waiting_->set(static_cast<int64_t>(parked_.size()));
    in_flight_->set(static_cast<int64_t>(queue_.in_flight()));
    ready_->set(static_cast<int64_t>(queue_.ready(self->clock().now())));
  }

  /// The item ended here (or was never): forget it.
  void forget(const std::string& work_id) {
    if (auto i = items_.find(work_id);
        i != items_.end() && !i->second.token.empty() && tokens_)
      tokens_->revoke(i->second.token);
    items_.erase(work_id);
    queue_.remove(work_id);
  }

  /// The item is still the butler's (not cancelled, timed out or lost).
  bool alive(butler_ptr self, const std::string& work_id) {
    if (self->state.pool->running(work_id))
      return true;
    forget(work_id);
    return false;
  }

  /// Ends `work_id` with `resp` through the butler's session-outcome path.
  void finish(butler_ptr self, const std::string& work_id,
              route_response resp) {
    auto i = items_.find(work_id);
    if (i == items_.end())
      return;
    auto& rec = i->second;
    resp.request_id = rec.request_id;
    resp.subrequest_id = rec.subrequest_id;
    resp.segment_id = rec.segment_id;
    resp.work_id = work_id;
    session_outcome out;
    out.work_id = work_id;
    out.lease_token = rec.db_token;
    out.state = resp.status == "ok" ? "ok" : "error";
    if (resp.status == "ok")
      out.reply = reply_of(resp.result);
    out.response = std::move(resp);
    self->send(self, done_atom_v, std::move(out));
  }

  void dead_letter(butler_ptr self, const worker_dead& d) {
    dead_->inc();
    auto i = items_.find(d.work_id);
    if (i == items_.end())
      return;
    auto& rec = i->second;
    auto message = "dead-lettered after " + std::to_string(d.deliveries)
                   + " deliveries to workers: " + d.message;
    spdlog::warn("butler {}: work {} {}", cfg_.name, d.work_id, message);
    named_statement stmt{"dead_letter_insert",
                         {rec.request_id, split_attempt(rec.segment_id).first,
                          cfg_.name, d.error_class, message,
                          std::to_string(d.deliveries)}};
    auto name = cfg_.name;
    auto work_id = d.work_id;
    self->request(self->state.writer, local_call, exec_atom_v, std::move(stmt))
      .then([](const named_result&) {},
            [self, name, work_id](const caf::error& err) {
              spdlog::warn("butler {}: dead letter of work {} not written: {}",
                           name, work_id, self->system().render(err));
            });
    auto resp = make_error_response(rec.request_id, d.error_class, message,
                                    false);
    finish(self, d.work_id, std::move(resp));
  }

  void expire(butler_ptr self, time_point now) {
    auto ex = queue_.expire(now);
    expired_->inc(ex.requeued.size() + ex.dead.size());
    for (auto& d : ex.dead)
      dead_letter(self, d);
  }

  std::string deliver(butler_ptr self, uint32_t max, milliseconds visibility,
                      time_point now) {
    std::vector<worker_delivery> out;
    while (out.size() < max) {
      auto got = queue_.take(1, visibility, now);
      if (got.empty())
        break;
      auto& h = got.front();
      if (!alive(self, h.work_id))
        continue;
      auto& rec = items_.at(h.work_id);
      worker_delivery d;
      d.work_id = h.work_id;
      d.lease_token = h.lease_token;
      d.envelope = rec.envelope;
      d.attempt = h.attempt;
      d.steer_inputs = rec.steer;
      d.visible_until_ms = unix_now_ms() + queue_.clamp(visibility).count();
      if (!rec.token.empty()) {
        d.mcp_url = self->state.ctx->mcp_url();
        d.mcp_token = rec.token;
      }
      out.push_back(std::move(d));
    }
    received_->inc(out.size());
    return render_deliveries(out);
  }

  caf::result<worker_reply> recv(butler_ptr self, worker_call& call,
                                 time_point now) {
    milliseconds vis{call.visibility_ms};
    if (queue_.ready(now) > 0 && parked_.empty()) {
      auto body = deliver(self, call.max, vis, now);
      update_gauges(self);
      if (body != R"({"items":[]})" || call.wait_ms == 0)
        return ok_reply(std::move(body));
    } else if (call.wait_ms == 0) {
      return ok_reply(R"({"items":[]})");
    }
    if (parked_.size() >= cfg_.runtime.max_waiting_receivers) {
      busy_->inc();
      return err_reply(butlers_errc::overload_rejected,
                       std::to_string(parked_.size())
                         + " recv calls wait already for butler '" + cfg_.name
                         + "' (max_waiting_receivers)");
    }
    auto rp = self->make_response_promise<worker_reply>();
    parked_.push_back(
      parked_recv{rp, call.max, vis, now + milliseconds{call.wait_ms}});
    arm(self, now);
    update_gauges(self);
    return rp;
  }

  caf::result<worker_reply> ack(butler_ptr self, worker_call& call) {
    auto& id = call.work_id;
    if (queue_.check(id, call.lease_token) != worker_check::ok
        || !alive(self, id))
      return stale(id);
    auto& rec = items_.at(id);
    route_response resp;
    if (!call.reply.empty()) {
      resp.status = "ok";
      resp.result = R"({"reply":)" + json::quote(call.reply) + "}";
    } else {
      std::string error;
      auto parsed = parse_route_response(call.response, &error);
      if (!parsed)
        return err_reply(butlers_errc::validation_error,
                         "field 'response': " + error);
      if (parsed->request_id != rec.request_id)
        return err_reply(butlers_errc::validation_error,
                         "field 'response': request_context.request_id '"
                           + parsed->request_id + "' is not the item's '"
                           + rec.request_id + "'");
      resp = std::move(*parsed);
    }
    queue_.ack(id, call.lease_token);
    acked_->inc();
    using ms = std::chrono::duration<double, std::milli>;
    resp.duration_ms = ms{std::chrono::steady_clock::now() - rec.since}.count();
    auto rp = self->make_response_promise<worker_reply>();
    acks_[id] = pending_ack{rp, resp.duration_ms};
    finish(self, id, std::move(resp));
    update_gauges(self);
    return rp;
  }

  caf::result<worker_reply> nack(butler_ptr self, worker_call& call,
                                 time_point now) {
    auto& id = call.work_id;
    if (queue_.check(id, call.lease_token) != worker_check::ok
        || !alive(self, id))
      return stale(id);
    auto message = call.error.empty() ? std::string{"nacked by a worker"}
                                      : call.error;
    auto r = queue_.nack(id, call.lease_token, call.retryable,
                         milliseconds{call.delay_ms}, call.error_class, message,
                         now);
    nacked_->inc();
    std::string body;
    if (r.dead) {
      dead_letter(self, *r.dead);
      body = R"({"work_id":)" + json::quote(id) + R"(,"dead_lettered":true})";
    } else if (r.failed) {
      finish(self, id,
             make_error_response({}, call.error_class, message, false));
      body = R"({"work_id":)" + json::quote(id) + R"(,"failed":true})";
    } else {
      body = R"({"work_id":)" + json::quote(id) + R"(,"requeued":true})";
      serve(self);
    }
    update_gauges(self);
    return ok_reply(std::move(body));
  }

  caf::result<worker_reply> extend(worker_call& call, time_point now) {
    auto& id = call.work_id;
    milliseconds vis{call.visibility_ms};
    if (queue_.extend(id, call.lease_token, vis, now) != worker_check::ok)
      return stale(id);
    return ok_reply(
      R"({"work_id":)" + json::quote(id) + R"(,"visible_until_ms":)"
      + std::to_string(unix_now_ms() + queue_.clamp(vis).count()) + "}");
  }

  worker_reply stale(const std::string& work_id) {
    return err_reply(butlers_errc::conflict,
                     "work item " + work_id
                       + " is not held under this lease_token (its "
                         "visibility lapsed and it was delivered again, it "
                         "ended, or it was never here)");
  }

  /// Expires lapsed deliveries, hands waiting items to parked receivers,
  /// answers receivers whose wait is over (all of them, 503, once the node
  /// drains), and arms the timer for what comes next.
  void serve(butler_ptr self) {
    auto now = self->clock().now();
    expire(self, now);
    if (self->state.ctx->status.draining) {
      for (auto& p : parked_)
        p.rp.deliver(err_reply(butlers_errc::draining,
                               "the node is draining for shutdown"));
      parked_.clear();
    }
    while (!parked_.empty() && queue_.ready(now) > 0) {
      auto p = std::move(parked_.front());
      parked_.pop_front();
      auto body = deliver(self, p.max, p.visibility, now);
      if (body == R"({"items":[]})") {
        parked_.push_front(std::move(p)); // the ready items were gone
        break;
      }
      p.rp.deliver(ok_reply(std::move(body)));
    }
    for (auto i = parked_.begin(); i != parked_.end();) {
      if (i->deadline <= now) {
        i->rp.deliver(ok_reply(R"({"items":[]})"));
        i = parked_.erase(i);
      } else {
        ++i;
      }
    }
    arm(self, now);
    update_gauges(self);
  }

  /// Arms one timer for the earliest of: a visibility deadline, a nacked
  /// item's delay, a parked receiver's deadline, and (while receivers are
  /// parked) a look at the drain flag every 250 ms.
  void arm(butler_ptr self, time_point now) {
    auto next = queue_.next_deadline(now);
    auto earlier = [&next](time_point t) {
      if (!next || t < *next)
        next = t;
    };
    for (auto& p : parked_)
      earlier(p.deadline);
    if (!parked_.empty())
      earlier(now + milliseconds{250});
    if (!next || (timer_at_ && *timer_at_ <= *next))
      return;
    timer_at_ = next;
    auto delay = std::max<time_point::duration>(*next - now, milliseconds{1});
    self->delayed_send(self, delay, worker_atom_v, ++timer_gen_);
  }

  butler_config cfg_;
  worker_queue queue_;
  std::unordered_map<std::string, item_record> items_;
  std::deque<parked_recv> parked_;
  std::unordered_map<std::string, pending_ack> acks_;
  /// The node's tokens (revoked as items end here).
  tool_tokens_ptr tokens_;
  uint64_t timer_gen_ = 0;
  std::optional<time_point> timer_at_;
  counter* received_ = nullptr;
  counter* acked_ = nullptr;
  counter* nacked_ = nullptr;
  counter* expired_ = nullptr;
  counter* dead_ = nullptr;
  counter* busy_ = nullptr;
  gauge* waiting_ = nullptr;
  gauge* in_flight_ = nullptr;
  gauge* ready_ = nullptr;
};

} // namespace

std::unique_ptr<work_runner> make_external_runner(const butler_config& cfg) {
  return std::make_unique<external_runner>(cfg);
}

// -- what other runners answer ------------------------------------------------

caf::result<worker_reply> work_runner::worker(butler_ptr self, worker_call&) {
  auto& cfg = self->state.params.cfg;
  return worker_reply{static_cast<uint8_t>(butlers_errc::conflict),
                      "butler '" + cfg.name + "' is not external (its runtime "
                        + "kind is '" + to_string(cfg.runtime.kind)
                        + "'); workers take items only from butlers with "
                          "[butler.runtime] kind = \"external\"",
                      {}};
}

void work_runner::worker_timer(butler_ptr, uint64_t) {
  // No timers.
}

void work_runner::written(butler_ptr, const session_outcome&, outcome_write) {
  // Nothing to tell.
}

} // namespace butlers
