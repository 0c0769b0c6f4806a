#include "runtime/forget.hpp"

#include <algorithm>
#include <set>

#include <pqxx/pqxx>

#include "runtime/dedupe.hpp"
#include "runtime/inbox_store.hpp"
#include "runtime/json.hpp"

namespace butlers {

namespace {

/// The channels of ingest.v1 (schemas/ingest.v1.json).
constexpr std::string_view channels[] = {"telegram", "slack", "email", "api",
                                         "mcp"};

/// `xs` as a PostgreSQL array literal of quoted elements.
std::string array_literal(const std::vector<std::string>& xs) {
  std::string out = "{";
  for (auto& x : xs) {
    if (out.size() > 1)
      out += ',';
    out += '"';
    for (char c : x) {
      if (c == '"' || c == '\\')
        out += '\\';
      out += c;
    }
    out += '"';
  }
  out += '}';
  return out;
}

int64_t first_count(const named_result& r) {
  if (r.rows.empty() || r.rows[0].empty())
    return 0;
  return std::stoll(r.rows[0][0]);
}

/// The ids a batch of requests names besides them.
struct batch_keys {
  std::vector<std::string> works;
  std::vector<std::string> threads;
  std::vector<std::string> hashes;
};

batch_keys read_batch_keys(pqxx::connection& conn,
                           const std::string& requests) {
  pqxx::nontransaction tx{conn};
  auto r = run_named(tx, named_statement{"forget_batch_keys", {requests}});
  batch_keys out;
  for (auto& row : r.rows) {
    if (row[0] == "work")
      out.works.push_back(row[1]);
    else if (row[0] == "thread")
      out.threads.push_back(row[1]);
    else
      out.hashes.push_back(row[1]);
  }
  return out;
}

/// Counts the work items `works` still open.
int64_t open_work(pqxx::connection& conn, const std::string& works) {
  pqxx::nontransaction tx{conn};
  return first_count(
    run_named(tx, named_statement{"forget_open_work", {works}}));
}

/// Runs one forget: a class so that its steps share the connection and the
/// report without long parameter lists.
class forgetting {
 public:
  forgetting(pqxx::connection& conn, const forget_order& order,
             const std::function<void(const std::string&)>& on_log,
             forget_report& report)
    : conn_(conn), order_(order), on_log_(on_log), report_(report) {
    // nop
  }

  void run() {
    auto requests = collect();
    report_.requests = static_cast<int64_t>(requests.size());
    log("forget: " + std::to_string(requests.size())
        + " request(s) of the sender found");
    commit_one("forget_tombstone_prune", {});
    // Tombstones first, all of them: from here on no reply of these
    // requests goes out, whatever the erasure below is at.
    for_batches(requests, [this](const std::string& ids) {
      commit_one("forget_tombstone", {ids});
    });
    for_batches(requests, [this](const std::string& ids) {
      erase_batch(ids);
    });
    for (auto& step : forget_catalogue())
      if (step.by == forget_step::sender)
        erase_by_sender(step);
  }

 private:
  std::vector<std::string> collect() {
    pqxx::nontransaction tx{conn_};
    auto r = run_named(tx, named_statement{"forget_requests",
                                           {order_.channel, order_.identity}});
    std::vector<std::string> out;
    out.reserve(r.rows.size());
    for (auto& row : r.rows)
      out.push_back(row[0]);
    return out;
  }

  template<class F>
  void for_batches(const std::vector<std::string>& ids, F f) {
    auto n = static_cast<size_t>(std::max(order_.batch, 1));
    for (size_t i = 0; i < ids.size(); i += n) {
      std::vector<std::string> part(ids.begin() + static_cast<ptrdiff_t>(i),
                                    ids.begin()
                                      + static_cast<ptrdiff_t>(
                                        std::min(ids.size(), i + n)));
      f(array_literal(part));
    }
  }

  void commit_one(const char* query, std::vector<std::string> params) {
    pqxx::work tx{conn_};
    run_named(tx, named_statement{query, std::move(params)});
    tx.commit();
    ++report_.transactions;
  }

  /// One transaction: every request-keyed table for the batch, children
  /// before what they derive from.
  void erase_batch(const std::string& requests) {
    auto keys = read_batch_keys(conn_, requests);
    auto works = array_literal(keys.works);
    report_.in_flight += open_work(conn_, works);
    pqxx::work tx{conn_};
    std::map<std::string, int64_t> got;
    for (auto& step : forget_catalogue()) {
      std::vector<std::string> params;
      switch (step.by) {
        case forget_step::requests: params = {requests}; break;
        case forget_step::requests_and_works: params = {requests, works}; break;
        case forget_step::threads:
          params = {array_literal(keys.threads)};
          break;
        case forget_step::hashes: params = {array_literal(keys.hashes)}; break;
        case forget_step::sender: continue;
      }
      got[step.table] += first_count(
        run_named(tx, named_statement{step.query, params}));
    }
    tx.commit();
    ++report_.transactions;
    for (auto& [table, n] : got)
      add(table, n);
  }

  /// A per-sender table, `batch` rows a transaction until none is left.
  void erase_by_sender(const forget_step& step) {
    for (;;) {
      pqxx::work tx{conn_};
      auto n = first_count(
        run_named(tx, named_statement{step.query,
                                      {order_.channel, order_.identity,
                                       std::to_string(order_.batch)}}));
      tx.commit();
      ++report_.transactions;
      add(step.table, n);
      if (n < order_.batch)
        return;
    }
  }

  void add(const std::string& table, int64_t n) {
    if (n == 0)
      return;
    report_.counts[table] += n;
    report_.total += n;
    log("forget: " + std::to_string(n) + " row(s) of " + table + " erased");
  }

  void log(const std::string& line) {
    if (on_log_)
      on_log_(line);
  }

  pqxx::connection& conn_;
  const forget_order& order_;
  const std::function<void(const std::string&)>& on_log_;
  forget_report& report_;
};

std::string counts_json(const std::map<std::string, int64_t>& counts) {
  std::string out = "{";
  for (auto& [table, n] : counts) {
    if (out.size() > 1)
      out += ',';
    out += json::quote(table) + ':' + std::to_string(n);
  }
  return out + '}';
}

/// Completes the audit row; on a connection of its own when `conn` broke.
void finish_audit(const std::string& url, pqxx::connection& conn,
                  const forget_report& r) {
  named_statement st{"forget_audit_end",
                     {std::to_string(r.audit_id), r.ok ? "done" : "failed",
                      counts_json(r.counts), std::to_string(r.total)}};
  auto write = [&st](pqxx::connection& c) {
    pqxx::work tx{c};
    run_named(tx, st);
    tx.commit();
  };
  if (conn.is_open()) {
    write(conn);
    return;
  }
  pqxx::connection again{url};
  write(again);
}

} // namespace

const std::vector<forget_step>& forget_catalogue() {
  // Every table that holds what a person wrote, or what derives from it,
  // and the statement that erases the sender's rows there. Children come
  // before what they derive from; `threads` and `attachments` last, since
  // they go only when nothing else names them. Tables that hold no text
  // of a person are not here: schema_migrations, connector_checkpoints,
  // connector_registry, connector_heartbeat_log, connector_stats_*,
  // connector_fanout_daily (counts per connector), forget_audit,
  // forget_tombstones (random ids only).
  static const std::vector<forget_step> steps = {
    {"tool_calls", "forget_tool_calls", forget_step::requests_and_works},
    {"approvals", "forget_approvals", forget_step::requests_and_works},
    {"outbound_ledger", "forget_outbound_ledger", forget_step::requests},
    {"fanout_execution_log", "forget_fanout_execution_log",
     forget_step::requests},
    {"fanout_plans", "forget_fanout_plans", forget_step::requests},
    {"dead_letters", "forget_dead_letters", forget_step::requests},
    {"routing_log", "forget_routing_log", forget_step::requests},
    {"inbox_transitions", "forget_inbox_transitions", forget_step::requests},
    {"operator_audit", "forget_operator_audit", forget_step::requests},
    {"thread_transcript", "forget_thread_transcript", forget_step::requests},
    {"thread_runs", "forget_thread_runs", forget_step::requests},
    {"route_work", "forget_route_work", forget_step::requests},
    {"butler_reminders", "forget_butler_reminders", forget_step::requests},
    {"inbox_dedupe", "forget_inbox_dedupe", forget_step::requests},
    {"message_inbox", "forget_message_inbox", forget_step::requests},
    {"threads", "forget_threads", forget_step::threads},
    {"attachments", "forget_attachments", forget_step::hashes},
    {"butler_state", "forget_butler_state", forget_step::sender},
    {"usage_daily", "forget_usage_daily", forget_step::sender},
    {"approvals", "forget_approvals_asked", forget_step::sender},
    {"butler_reminders", "forget_reminders_set", forget_step::sender},
  };
  return steps;
}

std::string parse_forget_sender(std::string_view text, forget_order& out) {
  auto colon = text.find(':');
  auto usage = std::string{"sender: must be CHANNEL:IDENTITY (e.g. "
                           "telegram:123456), CHANNEL one of telegram, "
                           "slack, email, api, mcp"};
  if (colon == std::string_view::npos || colon == 0 || colon + 1 == text.size())
    return usage;
  auto channel = text.substr(0, colon);
  if (std::find(std::begin(channels), std::end(channels), channel)
      == std::end(channels))
    return usage + "; unknown channel '" + std::string{channel} + "'";
  auto identity = text.substr(colon + 1);
  if (identity.size() > 256 || !json::is_utf8(identity))
    return "sender: the identity must be UTF-8 of at most 256 bytes";
  for (unsigned char c : identity)
    if (c < 0x20 || c == 0x7f)
      return "sender: the identity must have no control characters";
  out.channel = std::string{channel};
  out.identity = std::string{identity};
  return {};
}

std::string check_forget_order(const forget_order& x) {
  if (x.who.empty() || x.who.size() > 200)
    return "who: required, 1 to 200 bytes (the operator, for the audit)";
  if (x.why.empty() || x.why.size() > 2000)
    return "why: required, 1 to 2000 bytes (the reason, for the audit)";
  if (x.batch < 1 || x.batch > 10000)
    return "batch: must be 1..10000";
  if (!json::is_utf8(x.who) || !json::is_utf8(x.why))
    return "who, why: must be UTF-8";
  return {};
}

std::string parse_forget_body(std::string_view body, forget_order& out) {
  rapidjson::Document doc;
  if (json::parse(body, doc) || !doc.IsObject())
    return "the body must be a JSON object {\"sender\",\"who\",\"why\"}";
  bool have_sender = false;
  for (auto& m : doc.GetObject()) {
    std::string_view key{m.name.GetString(), m.name.GetStringLength()};
    if (key == "batch") {
      if (!m.value.IsInt())
        return "batch: must be an integer 1..10000";
      out.batch = m.value.GetInt();
      continue;
    }
    if (key != "sender" && key != "who" && key != "why")
      return "unknown field '" + std::string{key} + "'";
    if (!m.value.IsString())
      return std::string{key} + ": must be a string";
    std::string_view v{m.value.GetString(), m.value.GetStringLength()};
    if (key == "sender") {
      if (auto bad = parse_forget_sender(v, out); !bad.empty())
        return bad;
      have_sender = true;
    } else {
      (key == "who" ? out.who : out.why) = std::string{v};
    }
  }
  if (!have_sender)
    return "sender: required, CHANNEL:IDENTITY (e.g. telegram:123456)";
  return check_forget_order(out);
}

std::string forget_sender_hash(const forget_order& x) {
  return sha256_hex(x.channel + ":" + x.identity);
}

std::string forget_report_json(const forget_report& r,
                               const std::string& sender_sha256) {
  return R"({"audit_id":)" + std::to_string(r.audit_id) + R"(,"sender_sha256":)"
         + json::quote(sender_sha256) + R"(,"requests":)"
         + std::to_string(r.requests) + R"(,"in_flight":)"
         + std::to_string(r.in_flight) + R"(,"total":)"
         + std::to_string(r.total) + R"(,"counts":)" + counts_json(r.counts)
         + "}";
}

forget_report run_forget(
  const std::string& url, const forget_order& order,
  const std::function<void(const std::string&)>& on_log) {
  forget_report report;
  try {
    pqxx::connection conn{url};
    {
      pqxx::work tx{conn};
      auto r = run_named(tx, named_statement{"forget_audit_begin",
                                             {order.who, order.why,
                                              forget_sender_hash(order)}});
      tx.commit();
      report.audit_id = std::stoll(r.rows.at(0).at(0));
    }
    try {
      forgetting{conn, order, on_log, report}.run();
      report.ok = true;
    } catch (const std::exception& e) {
      report.error = e.what();
    }
    finish_audit(url, conn, report);
  } catch (const std::exception& e) {
    if (report.error.empty())
      report.error = e.what();
    report.ok = false;
  }
  return report;
}

} // namespace butlers
