#include "actors/supervisor.hpp"

#include <algorithm>
#include <map>
#include <memory>
#include <random>

#include <caf/actor_cast.hpp>
#include <caf/actor_system.hpp>
#include <caf/exit_reason.hpp>
#include <caf/spawn_options.hpp>
#include <caf/system_messages.hpp>
#include <spdlog/spdlog.h>

#include "actors/butler.hpp"
#include "actors/connector.hpp"
#include "actors/connector_stats.hpp"
#include "actors/db_reader.hpp"
#include "actors/inbox_scanner.hpp"
#include "actors/inbox_writer.hpp"
#include "actors/messenger.hpp"
#include "actors/registry.hpp"
#include "actors/retention.hpp"
#include "actors/switchboard.hpp"
#include "actors/thread_directory.hpp"
#include "actors/tool_server.hpp"

namespace butlers {

namespace {

caf::timespan restart_delay(uint32_t attempt) {
  using namespace std::chrono;
  auto base = milliseconds{100} * (1u << std::min<uint32_t>(attempt, 7));
  auto capped = std::min<milliseconds>(base, seconds{10});
  thread_local std::mt19937 rng{std::random_device{}()};
  std::uniform_real_distribution<double> dist{0.5, 1.5};
  return duration_cast<caf::timespan>(capped * dist(rng));
}

using supervisor_ptr = supervisor_actor::stateful_pointer<supervisor_state>;

/// The butlers this node runs: the configured ones placed here (node "" or
/// this node's name, and named by `cluster.butlers`), `general` unless
/// configured (on a switchboard node, or when `cluster.butlers` names it),
/// and the messenger on a switchboard node.
std::vector<butler_config> hosted_butlers(const node_settings& s) {
  std::vector<butler_config> out;
  bool has_general = false;
  for (auto& b : s.butlers) {
    has_general = has_general || b.name == "general";
    if (!b.node.empty() && b.node != s.node.name)
      continue;
    if (!s.cluster.hosts(b.name))
      continue;
    out.push_back(b);
  }
  auto& hosts = s.cluster.butlers;
  bool general_named = std::find(hosts.begin(), hosts.end(), "general")
                       != hosts.end();
  if (!has_general && (s.cluster.switchboard || general_named))
    out.push_back(default_general());
  if (s.cluster.switchboard)
    out.push_back(messenger_butler(s.messenger));
  return out;
}

/// One connector per enabled `[[connector]]`, published by name for the
/// HTTP server's connector routes.
void start_connectors(supervisor_ptr self) {
  auto& st = self->state;
  auto& s = st.settings;
  std::map<std::string, connector_actor> published;
  for (auto& cfg : s.connectors) {
    if (!cfg.enabled)
      continue;
    connector_params p;
    p.cfg = cfg;
    p.switchboard = st.switchboard;
    p.writer = st.writer;
    p.reader = st.reader;
    p.ctx = st.ctx;
    p.max_envelope_bytes = s.http.max_body_bytes;
    p.dedupe_window_s = s.switchboard.dedupe_window_s;
    p.stats = st.connector_stats;
    p.heartbeat_s = s.connector_stats.heartbeat_s;
    p.database_url = s.database.url;
    p.attachments = s.attachments;
    auto hdl = self->spawn<caf::linked>(connector, std::move(p));
    published.emplace(cfg.name, hdl);
    st.connectors.push_back(std::move(hdl));
  }
  st.ctx->set_connectors(std::move(published));
}

/// `from` of the first smtp adapter that delivers email ("" when none).
std::string mail_from_of(const messenger_config& m) {
  for (auto& a : m.adapters)
    if (a.kind == adapter_kind::smtp
        && std::any_of(a.channels.begin(), a.channels.end(),
                       [](const std::string& c) {
                         return c == "*" || c == "email";
                       }))
      return a.from;
  return {};
}

void start_group(supervisor_ptr self) {
  auto& st = self->state;
  st.restarting = false;
  if (!st.ctx->status.database_configured)
    return;
  auto& s = st.settings;
  st.writer = self->spawn<caf::linked>(inbox_writer, s.database, s.node.name,
                                       s.switchboard.lease_s, st.ctx);
  // A butler-only node (`cluster.switchboard = false`) runs no switchboard
  // and no cold path: its butlers answer to the switchboard nodes.
  if (s.cluster.switchboard)
    st.switchboard = self->spawn<caf::linked>(switchboard, s.switchboard,
                                              routing_settings{s.router,
                                                               s.policies,
                                                               s.rate_limits},
                                              st.writer, st.ctx);
  st.reader = self->spawn<caf::linked>(db_reader_pool, s.database, st.ctx);
  st.ctx->set_reader(st.reader);
  if (s.cluster.switchboard) {
    st.scanner = self->spawn<caf::detached + caf::linked>(inbox_scanner,
                                                          s.database,
                                                          s.switchboard,
                                                          st.switchboard,
                                                          st.ctx);
    st.ctx->set_switchboard(st.switchboard);
    st.connector_stats = self->spawn<caf::linked>(connector_stats,
                                                  s.connector_stats, st.writer,
                                                  st.reader, st.ctx);
    st.ctx->set_connector_stats(st.connector_stats);
    if (s.retention.enabled)
      st.retention = self->spawn<caf::detached + caf::linked>(retention,
                                                              s.retention,
                                                              s.database,
                                                              st.ctx);
    start_connectors(self);
  }
  cluster_hello hello;
  hello.node = s.node.name;
  hello.switchboard = untyped(st.switchboard);
  st.registry = self->spawn<caf::linked>(registry, s.node.name);
  for (auto& cfg : hosted_butlers(s)) {
    butler_params params;
    params.adapters = s.messenger.adapters;
    params.connectors = s.connectors;
    params.budgets = s.budgets;
    params.node = s.node.name;
    params.cfg = cfg;
    auto hdl = cfg.name == "messenger"
                 ? self->spawn<caf::linked>(messenger, std::move(params),
                                            st.writer, st.ctx)
                 : self->spawn<caf::linked>(butler, std::move(params),
                                            st.writer, st.ctx);
    registry_entry entry;
    entry.name = cfg.name;
    entry.description = cfg.description;
    entry.triggers = cfg.triggers;
    entry.keywords = cfg.keywords;
    entry.capabilities = cfg.capabilities;
    entry.max_concurrent_sessions = cfg.max_concurrent_sessions;
    entry.node = s.node.name;
    if (entry.name == "messenger") {
      st.ctx->set_messenger(hdl);
    } else {
      // The messenger delivers for its own node's switchboard only.
      hello.entries.push_back(entry);
      hello.handles.push_back(untyped(hdl));
    }
    self->send(st.registry, register_atom_v, std::move(entry), hdl);
    st.butlers.push_back(std::move(hdl));
  }
  st.ctx->set_registry(st.registry);
  // The cluster announces the new group to every peer and refills the new
  // registry with theirs.
  if (auto cl = st.ctx->cluster())
    self->send(cl, local_atom_v, std::move(hello), st.registry);
  thread_env tenv;
  tenv.cfg = s.threads;
  tenv.writer = st.writer;
  tenv.registry = st.registry;
  tenv.reader = st.reader;
  tenv.hub = st.ctx->events;
  tenv.timeout = std::chrono::milliseconds{s.http.request_timeout_ms};
  st.threads = self->spawn<caf::linked>(thread_directory, std::move(tenv),
                                        st.ctx);
  st.ctx->set_threads(st.threads);
  tool_server_params tp;
  tp.cfg = s.tools;
  for (auto& cfg : hosted_butlers(s))
    if (cfg.name != "messenger")
      tp.butlers.push_back(cfg.name);
  tp.writer = st.writer;
  tp.reader = st.reader;
  tp.registry = st.registry;
  for (auto& c : s.connectors)
    if (c.type == connector_type::telegram && c.enabled)
      tp.telegram.push_back(c);
  tp.mail_from = mail_from_of(s.messenger);
  st.tools = self->spawn<caf::linked>(tool_server, std::move(tp), st.ctx);
  st.ctx->set_tool_server(st.tools);
}

bool is_child(supervisor_ptr self, const caf::actor_addr& addr) {
  auto& st = self->state;
  for (auto& b : st.butlers)
    if (addr == b.address())
      return true;
  for (auto& c : st.connectors)
    if (addr == c.address())
      return true;
  return (st.writer && addr == st.writer.address())
         || (st.switchboard && addr == st.switchboard.address())
         || (st.scanner && addr == st.scanner.address())
         || (st.retention && addr == st.retention.address())
         || (st.registry && addr == st.registry.address())
         || (st.reader && addr == st.reader.address())
         || (st.threads && addr == st.threads.address())
         || (st.tools && addr == st.tools.address())
         || (st.connector_stats && addr == st.connector_stats.address());
}

/// Clean shutdown: drains every local butler (each waits up to `wait` for
/// its running sessions, then releases its work leases), then has the
/// switchboard release its inbox leases; answers the leases released. The
/// butlers go first: a session that finishes while they wait still
/// completes its request through the switchboard.
caf::result<uint32_t> drain_group(
  supervisor_actor::stateful_pointer<supervisor_state> self,
  caf::timespan wait) {
  auto& st = self->state;
  auto rp = self->make_response_promise<uint32_t>();
  auto total = std::make_shared<uint32_t>(0);
  auto pending = std::make_shared<size_t>(st.butlers.size());
  auto then_switchboard = [self, rp, total]() mutable {
    auto sb = self->state.switchboard;
    if (!sb) {
      rp.deliver(*total);
      return;
    }
    self->request(sb, std::chrono::seconds{1}, drain_atom_v)
      .then(
        [rp, total](uint32_t n) mutable {
          rp.deliver(*total + n);
        },
        [rp, total](const caf::error&) mutable {
          rp.deliver(*total);
        });
  };
  if (st.butlers.empty()) {
    then_switchboard();
    return rp;
  }
  auto one_done = [pending, then_switchboard]() mutable {
    if (--*pending == 0)
      then_switchboard();
  };
  for (auto& b : st.butlers)
    self->request(b, wait + std::chrono::seconds{1}, drain_atom_v, wait)
      .then(
        [total, one_done](uint32_t n) mutable {
          *total += n;
          one_done();
        },
        [one_done](const caf::error&) mutable {
          one_done();
        });
  return rp;
}

} // namespace

supervisor_actor::behavior_type supervisor(
  supervisor_actor::stateful_pointer<supervisor_state> self,
  node_settings settings, node_context_ptr ctx) {
  self->state.settings = std::move(settings);
  self->state.ctx = std::move(ctx);
  auto& restarts = self->state.ctx->metrics.get_counter(
    "butlers_supervisor_restarts_total",
    "Actor groups restarted after an abnormal exit");
  start_group(self);
  self->set_exit_handler([self, &restarts](const caf::exit_msg& msg) {
    auto& st = self->state;
    if (!is_child(self, msg.source)) {
      // Not a current child: our own shutdown (anon_send_exit from the
      // node), or a late exit of a group already being restarted.
      if (!st.restarting)
        self->quit(msg.reason);
      return;
    }
    if (!msg.reason || msg.reason == caf::exit_reason::user_shutdown)
      return;
    // One child failed: the others hold its handle, so the group restarts.
    restarts.inc();
    auto delay = restart_delay(st.restarts++);
    spdlog::error("a node actor died ({}), restarting its group in {} ms",
                  self->system().render(msg.reason),
                  std::chrono::duration_cast<std::chrono::milliseconds>(delay)
                    .count());
    st.ctx->set_switchboard({});
    st.ctx->set_registry({});
    st.ctx->set_messenger({});
    st.ctx->set_threads({});
    st.ctx->set_connectors({});
    st.ctx->set_connector_stats({});
    for (auto& c : st.connectors)
      self->send_exit(c, caf::exit_reason::kill);
    st.connectors.clear();
    self->send_exit(st.connector_stats, caf::exit_reason::kill);
    st.connector_stats = nullptr;
    self->send_exit(st.threads, caf::exit_reason::kill);
    self->send_exit(st.tools, caf::exit_reason::kill);
    self->send_exit(st.writer, caf::exit_reason::kill);
    self->send_exit(st.switchboard, caf::exit_reason::kill);
    self->send_exit(st.scanner, caf::exit_reason::kill);
    self->send_exit(st.retention, caf::exit_reason::kill);
    self->send_exit(st.registry, caf::exit_reason::kill);
    self->send_exit(st.reader, caf::exit_reason::kill);
    for (auto& b : st.butlers)
      self->send_exit(b, caf::exit_reason::kill);
    st.writer = nullptr;
    st.switchboard = nullptr;
    st.scanner = nullptr;
    st.retention = nullptr;
    st.registry = nullptr;
    st.reader = nullptr;
    st.threads = nullptr;
    st.tools = nullptr;
    st.ctx->set_tool_server({});
    st.butlers.clear();
    st.ctx->set_reader({});
    st.restarting = true;
    self->delayed_send(self, delay, restart_atom_v);
  });
  return {
    [self](restart_atom) {
      if (self->state.restarting)
        start_group(self);
    },
    [self](drain_atom, caf::timespan wait) {
      return drain_group(self, wait);
    },
  };
}

} // namespace butlers
