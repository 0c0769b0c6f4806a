#include "actors/connector.hpp"

#include <algorithm>
#include <csignal>
#include <cstdlib>
#include <future>
#include <tuple>
#include <utility>
#include <vector>

#include <caf/actor_system.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/exit_reason.hpp>
#include <caf/send.hpp>
#include <caf/spawn_options.hpp>
#include <spdlog/spdlog.h>

#include "runtime/approvals.hpp"
#include "runtime/connector_ingest.hpp"
#include "runtime/connector_sources.hpp"
#include "runtime/threads.hpp"

namespace butlers {

namespace {

/// How long a source waits for one answer of an actor before it counts
/// the call as unavailable (the actors answer every call; this only bounds
/// a call that met a restart).
constexpr std::chrono::seconds sink_timeout{60};

/// What a failed submission means to its source.
submit_outcome outcome_of(const caf::error& err) {
  submit_outcome out;
  auto code = code_of(err);
  out.message = message_of(err);
  if (out.message.empty())
    out.message = to_string(code);
  switch (code) {
    case butlers_errc::overload_rejected:
    case butlers_errc::connector_rate_limited:
      out.status = submit_status::refused;
      break;
    case butlers_errc::sender_rate_limited:
      out.status = submit_status::rate_limited;
      break;
    case butlers_errc::validation_error:
      out.status = submit_status::invalid;
      break;
    default: out.status = submit_status::unavailable;
  }
  return out;
}

/// What one record's result in a batch means to its source.
submit_outcome outcome_of(append_result& r) {
  if (r.error_code != 0)
    return outcome_of(caf::error{static_cast<butlers_errc>(r.error_code),
                                 std::move(r.error_message)});
  submit_outcome out;
  out.status = r.duplicate ? submit_status::deduped : submit_status::accepted;
  out.request_id = std::move(r.request_id);
  return out;
}

/// The sink of a connector's source (see `make_connector_sink`).
class actor_sink final : public connector_sink {
 public:
  actor_sink(caf::actor_system& sys, connector_actor hdl,
             const connector_params& p, std::shared_ptr<connector_stop> stop)
    : sys_(sys), hdl_(std::move(hdl)), switchboard_(p.switchboard),
      writer_(p.writer), reader_(p.reader), ctx_(p.ctx),
      metrics_(connector_metrics::of(p.ctx->metrics, p.cfg.name)),
      stop_(std::move(stop)) {
    rules_.connector = p.cfg.name;
    rules_.endpoint_identity = p.cfg.endpoint_identity;
    rules_.max_bytes = p.max_envelope_bytes;
    rules_.dedupe_window_s = p.dedupe_window_s;
  }

  std::vector<submit_outcome> submit_all(
    std::vector<submission> batch) override {
    std::vector<submit_outcome> out(batch.size());
    std::vector<inbox_record> recs;
    std::vector<size_t> where; // index in `out` of each of `recs`
    metrics_.received->inc(batch.size());
    auto now = unix_now_us();
    for (size_t i = 0; i < batch.size(); ++i) {
      auto parsed = parse_connector_envelope(batch[i].envelope, rules_,
                                             batch[i].dedupe_hint, now);
      if (!parsed.record) {
        metrics_.invalid->inc();
        out[i].status = submit_status::invalid;
        out[i].message = describe_rejection(parsed);
        continue;
      }
      recs.push_back(std::move(*parsed.record));
      where.push_back(i);
    }
    if (recs.empty())
      return out;
    auto n = recs.size();
    auto res = call<std::vector<append_result>>(hdl_, ingest_atom_v,
                                                std::move(recs));
    for (size_t j = 0; j < n; ++j) {
      auto& o = out[where[j]];
      if (!res || j >= res->size()) {
        o.status = submit_status::unavailable;
        o.message = "the connector did not answer";
      } else {
        o = outcome_of((*res)[j]);
      }
    }
    return out;
  }

  void count(source_event what, uint64_t n) override {
    switch (what) {
      case source_event::ignored:
        metrics_.received->inc(n);
        metrics_.ignored->inc(n);
        break;
      case source_event::invalid:
        metrics_.received->inc(n);
        metrics_.invalid->inc(n);
        break;
      case source_event::failed: metrics_.errors->inc(n); break;
      case source_event::attachment_refused:
        metrics_.received->inc(n);
        metrics_.attachments_refused->inc(n);
        break;
    }
  }

  checkpoint_read load_checkpoint(const std::string& key) override {
    named_statement st{"connector_checkpoint_read", {rules_.connector, key}};
    auto r = call<named_result>(reader_, read_atom_v, std::move(st));
    checkpoint_read out;
    out.ok = r && r->ok;
    if (out.ok && !r->rows.empty() && !r->rows[0].empty())
      out.value = r->rows[0][0];
    return out;
  }

  bool store_checkpoint(const std::string& key,
                        const std::string& value) override {
    // Keyed by the connector: its checkpoints commit in the order stored.
    named_statement st{"connector_checkpoint_store",
                       {rules_.connector, key, value},
                       "connector:" + rules_.connector};
    auto r = call<named_result>(writer_, exec_atom_v, std::move(st));
    return r && r->ok && !r->rows.empty();
  }

  connector_stop& stop() override {
    return *stop_;
  }

  approval_reply answer_approval(const approval_mail& m) override {
    auto tools = ctx_->tool_server();
    if (!tools)
      return approval_reply::later;
    auto r = call<tool_result>(tools, approve_atom_v, m);
    if (!r)
      return approval_reply::later;
    if (r->status == tool_status::ok || r->reason == "forbidden"
        || r->reason == "conflict")
      return approval_reply::settled;
    return r->reason == "not_found" ? approval_reply::not_an_answer
                                    : approval_reply::later;
  }

  bool deliver(std::string notify) override {
    auto r = call<route_response>(switchboard_, deliver_atom_v,
                                  std::move(notify));
    return r && r->status != "error";
  }

 private:
  /// One request to `hdl`, waited for on this (the source's) thread.
  /// One request to `hdl`, waited for on this (the source's) thread;
  /// nullopt when it failed, or at once when the connector stops: an actor
  /// of CAF 0.17 that dies holding a request never answers it, so the
  /// request's own actor is ended then rather than waited for (the node's
  /// shutdown waits for every actor).
  template<class Reply, class Handle, class... Ts>
  std::optional<Reply> call(const Handle& hdl, Ts... xs) {
    if (!hdl || stop_->raised())
      return std::nullopt;
    auto done = std::make_shared<std::promise<std::optional<Reply>>>();
    auto result = done->get_future();
    auto caller = sys_.spawn(
      [](caf::event_based_actor* self, Handle hdl,
         std::shared_ptr<std::promise<std::optional<Reply>>> done,
         std::tuple<Ts...> msg) {
        std::apply(
          [&](auto&... xs) {
            self->request(hdl, sink_timeout, std::move(xs)...)
              .then(
                [done](Reply& r) {
                  done->set_value(std::move(r));
                },
                [done](const caf::error&) {
                  done->set_value(std::nullopt);
                });
          },
          msg);
      },
      hdl, done, std::make_tuple(std::move(xs)...));
    while (result.wait_for(std::chrono::milliseconds{20})
           != std::future_status::ready) {
      if (stop_->raised()) {
        caf::anon_send_exit(caller, caf::exit_reason::kill);
        return std::nullopt;
      }
    }
    return result.get();
  }

  caf::actor_system& sys_;
  connector_actor hdl_;
  switchboard_actor switchboard_;
  inbox_writer_actor writer_;
  db_reader_actor reader_;
  node_context_ptr ctx_;
  connector_ingest_rules rules_;
  connector_metrics metrics_;
  std::shared_ptr<connector_stop> stop_;
};

using connector_ptr = connector_actor::stateful_pointer<connector_state>;

/// The test-only fault point (see `connector_state`).
void after_commit(connector_state& st) {
  if (st.kill_after_commits != 0 && ++st.commits == st.kill_after_commits)
    std::raise(SIGKILL);
}

/// Counts one record's result.
void count(connector_state& st, const append_result& r) {
  if (r.error_code == 0)
    (r.duplicate ? st.metrics.deduped : st.metrics.accepted)->inc();
  else if (auto code = static_cast<butlers_errc>(r.error_code);
           code == butlers_errc::overload_rejected || is_rate_limited(code))
    st.metrics.refused->inc();
  else
    st.metrics.errors->inc();
}

/// Sends the records to the switchboard as one batch, in order, and
/// answers after the commit; those beyond `max_in_flight` are refused.
caf::result<std::vector<append_result>> submit_batch(
  connector_ptr self, std::vector<inbox_record>&& recs) {
  auto& st = self->state;
  auto room = st.cfg.max_in_flight
              - std::min(st.in_flight, st.cfg.max_in_flight);
  auto taken = std::min<size_t>(room, recs.size());
  std::vector<append_result> refused(recs.size() - taken);
  for (auto& r : refused) {
    r.error_code = static_cast<uint8_t>(butlers_errc::overload_rejected);
    r.error_message = "connector " + st.cfg.name + ": max_in_flight ("
                      + std::to_string(st.cfg.max_in_flight) + ") reached";
    st.metrics.refused->inc();
  }
  if (taken == 0)
    return refused;
  recs.resize(taken);
  auto n = static_cast<uint32_t>(taken);
  st.in_flight += n;
  st.metrics.in_flight->add(n);
  auto rp = self->make_response_promise<std::vector<append_result>>();
  auto finish = [self, rp, n, refused](std::vector<append_result> res) mutable {
    auto& st = self->state;
    st.in_flight -= n;
    st.metrics.in_flight->add(-static_cast<int64_t>(n));
    if (std::any_of(res.begin(), res.end(), [](const append_result& r) {
          return r.error_code == 0;
        }))
      after_commit(st);
    for (auto& r : res)
      count(st, r);
    res.insert(res.end(), refused.begin(), refused.end());
    rp.deliver(std::move(res));
  };
  self->request(st.switchboard, caf::infinite, ingest_atom_v, std::move(recs))
    .then(
      [finish](std::vector<append_result>& res) mutable {
        finish(std::move(res));
      },
      [finish, n](caf::error& err) mutable {
        append_result failed;
        failed.error_code = static_cast<uint8_t>(code_of(err));
        failed.error_message = message_of(err);
        finish(std::vector<append_result>(n, failed));
      });
  return rp;
}

/// Sends `rec` to the switchboard and answers `rp` after the commit.
caf::result<append_result> submit(connector_ptr self, inbox_record&& rec) {
  auto& st = self->state;
  if (st.in_flight >= st.cfg.max_in_flight) {
    st.metrics.refused->inc();
    return caf::error{butlers_errc::overload_rejected,
                      "connector " + st.cfg.name + ": "
                        + std::to_string(st.cfg.max_in_flight)
                        + " envelope(s) already wait for their commit "
                          "(max_in_flight)"};
  }
  ++st.in_flight;
  st.metrics.in_flight->add(1);
  auto rp = self->make_response_promise<append_result>();
  auto leave = [self] {
    auto& st = self->state;
    --st.in_flight;
    st.metrics.in_flight->add(-1);
  };
  // No timeout: the switchboard answers every record once the writer has
  // (or at once when it refuses); if it dies, this group restarts with it.
  self->request(st.switchboard, caf::infinite, ingest_atom_v, std::move(rec))
    .then(
      [self, rp, leave](append_result& r) mutable {
        leave();
        auto& st = self->state;
        after_commit(st);
        (r.duplicate ? st.metrics.deduped : st.metrics.accepted)->inc();
        rp.deliver(std::move(r));
      },
      [self, rp, leave](caf::error& err) mutable {
        leave();
        auto& st = self->state;
        if (code_of(err) == butlers_errc::overload_rejected
            || is_rate_limited(code_of(err)))
          st.metrics.refused->inc();
        else
          st.metrics.errors->inc();
        rp.deliver(std::move(err));
      });
  return rp;
}

/// Starts the source of the connector's type, if it has one.
void start_source(connector_ptr self, const connector_params& p) {
  connector_source_limits limits;
  limits.max_envelope_bytes = p.max_envelope_bytes;
  limits.on_callback = [ctx = p.ctx](const std::string& bot,
                                     const std::string& update) {
    if (auto tools = ctx->tool_server())
      caf::anon_send(tools, approve_atom_v, bot, update);
  };
  limits.database_url = p.database_url;
  limits.attachments = p.attachments;
  auto src = make_connector_source(p.cfg, limits, p.ctx->metrics);
  if (!src)
    return;
  auto sink = make_connector_sink(self->system(), connector_actor{self}, p,
                                  self->state.stop);
  self->spawn<caf::detached + caf::linked>(connector_runner, p.cfg.name,
                                           std::shared_ptr<connector_source>{
                                             std::move(src)},
                                           std::move(sink),
                                           self->state.metrics);
}

} // namespace

uint32_t connector_fault_commits(const char* fault) {
  if (fault == nullptr)
    return 0;
  std::string_view f{fault};
  constexpr std::string_view name = "connector_after_commit";
  if (f.substr(0, name.size()) != name)
    return 0;
  if (f.size() == name.size())
    return 1;
  if (f[name.size()] != '=')
    return 0;
  uint32_t n = 0;
  for (auto c : f.substr(name.size() + 1)) {
    if (c < '0' || c > '9' || n > 100000)
      return 0;
    n = n * 10 + static_cast<uint32_t>(c - '0');
  }
  return n;
}

std::shared_ptr<connector_sink> make_connector_sink(
  caf::actor_system& sys, connector_actor hdl, const connector_params& p,
  std::shared_ptr<connector_stop> stop) {
  return std::make_shared<actor_sink>(sys, std::move(hdl), p, std::move(stop));
}

connector_actor::behavior_type connector(
  connector_actor::stateful_pointer<connector_state> self,
  connector_params params) {
  auto& st = self->state;
  st.cfg = params.cfg;
  st.switchboard = params.switchboard;
  st.metrics = connector_metrics::of(params.ctx->metrics, st.cfg.name);
  st.metrics.up->set(1);
  st.stop = std::make_shared<connector_stop>();
  st.kill_after_commits = connector_fault_commits(std::getenv("BUTLERS_FAULT"));
  if (st.kill_after_commits != 0)
    spdlog::warn("connector {}: BUTLERS_FAULT: the process kills itself "
                 "after commit {} (a test-only fault point)",
                 st.cfg.name, st.kill_after_commits);
  // Whatever ends this actor (shutdown, a group restart) stops the source.
  self->attach_functor([stop = st.stop] {
    stop->raise();
  });
  st.stats = params.stats;
  st.heartbeat_s = params.heartbeat_s;
  st.started = std::chrono::steady_clock::now();
  start_source(self, params);
  if (st.stats && st.heartbeat_s > 0)
    self->send(self, heartbeat_atom_v);
  spdlog::info("connector {}: {} connector started (max_in_flight {})",
               st.cfg.name, to_string(st.cfg.type), st.cfg.max_in_flight);
  return {
    [self](ingest_atom, inbox_record& rec) {
      return submit(self, std::move(rec));
    },
    [self](ingest_atom, std::vector<inbox_record>& recs) {
      return submit_batch(self, std::move(recs));
    },
    [self](status_atom) {
      return self->state.in_flight;
    },
    [self](heartbeat_atom) {
      send_connector_heartbeat(self);
    },
  };
}

connector_runner_actor::behavior_type connector_runner(
  connector_runner_actor::pointer self, std::string name,
  std::shared_ptr<connector_source> source,
  std::shared_ptr<connector_sink> sink, connector_metrics metrics) {
  self->send(self, run_atom_v);
  return {
    [self, name, source, sink, metrics](run_atom) {
      auto& stop = sink->stop();
      auto backoff = std::chrono::milliseconds{1000};
      while (!stop.raised()) {
        try {
          source->run(*sink);
          break;
        } catch (const std::exception& e) {
          metrics.errors->inc();
          spdlog::error("connector {}: source failed: {}; again in {} ms", name,
                        e.what(), backoff.count());
        }
        stop.sleep_for(backoff);
        backoff = std::min<std::chrono::milliseconds>(backoff * 2,
                                                      std::chrono::seconds{60});
      }
      if (!stop.raised()) {
        metrics.up->set(0);
        spdlog::error("connector {}: stopped for good (see above); restart "
                      "the node once it is fixed",
                      name);
      }
      self->quit();
    },
  };
}

} // namespace butlers
