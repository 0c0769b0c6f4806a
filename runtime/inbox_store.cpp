#include "runtime/inbox_store.hpp"

#include <algorithm>
#include <cstdio>
#include <limits>
#include <unordered_map>

#include <pqxx/pqxx>

#include "runtime/attachments.hpp"
#include "runtime/embedded.hpp"
#include "runtime/migrations.hpp"
#include "runtime/pg_array.hpp"
#include "runtime/usage.hpp"

namespace butlers {

namespace {

/// Statements prepared once per connection, the group commit's whole hot
/// path. Their plans are generic (`plan_cache_mode = force_generic_plan`,
/// set at connect) and cannot depend on the tables' size: every table is
/// reached through its key (`= ANY` of the batch's keys, or equality), and
/// the writer's sessions run with `enable_seqscan = off`, so a plan made
/// while a table (or a new month's partition) was empty never seq-scans it
/// once it has grown. (Planned at every execution instead, these
/// statements spent twice as long in the planner as in execution.) They
/// also run with `enable_nestloop = off`: a generic plan guesses ten rows
/// for the batch's arrays and joined them to the rows found by a nested
/// loop, quadratic in the batch (at 150 rows, 22,500 comparisons, most of
/// a completion's time); a hash join is linear. A plan store turns it back
/// on around itself: a lateral call needs a nested loop. (Planner settings
/// apply when a plan is made, so each statement runs under its own.)
constexpr const char* prepared[] = {"inbox_append",
                                    "inbox_lookup_dedupe",
                                    "inbox_claim",
                                    "inbox_complete",
                                    "work_append",
                                    "work_start",
                                    "work_renew",
                                    "work_finish",
                                    "work_finish_usage",
                                    "fanout_plan_store",
                                    "fanout_segment_update"};

/// Statements planned at every execution (unnamed, PQexecParams): scans
/// whose best plan depends on how much is open (the cold path, recovery).
const std::string& replanned(const std::string& name) {
  static const auto queries = [] {
    std::unordered_map<std::string, std::string> m;
    for (auto n : {"inbox_scan", "work_lease"})
      m.emplace(n, named_query(n));
    return m;
  }();
  return queries.at(name);
}

} // namespace

void apply_deadlines(pqxx::connection& conn, session_deadlines d) {
  pqxx::nontransaction{conn}.exec(
    "SET statement_timeout = " + std::to_string(d.statement_ms)
    + "; SET lock_timeout = " + std::to_string(d.lock_ms));
}

deadline_kind deadline_of(const std::exception& e) {
  auto* sql = dynamic_cast<const pqxx::sql_error*>(&e);
  if (sql == nullptr)
    return deadline_kind::none;
  auto state = sql->sqlstate();
  if (state == "57014")
    return deadline_kind::statement;
  if (state == "55P03")
    return deadline_kind::lock;
  return deadline_kind::none;
}

const char* to_string(deadline_kind k) {
  switch (k) {
    case deadline_kind::statement: return "statement_timeout";
    case deadline_kind::lock: return "lock_timeout";
    case deadline_kind::none: break;
  }
  return "none";
}

inbox_store::inbox_store(std::string url, std::string owner, uint32_t lease_s)
  : url_(std::move(url)), owner_(std::move(owner)), lease_s_(lease_s) {
  // nop
}

inbox_store::~inbox_store() = default;

void inbox_store::connect() {
  conn_.reset();
  auto conn = std::make_unique<pqxx::connection>(url_);
  // No JIT: with seq scans and nested loops priced out, a small statement
  // that still needs one (a one-row cross join) is costed past
  // jit_above_cost, and PostgreSQL's default JIT then compiles it for
  // ~160 ms on every execution (a thread turn took 170 ms instead of 2).
  // The writer's statements touch a few rows each; JIT never pays here.
  pqxx::nontransaction{*conn}.exec(
    "SET plan_cache_mode = force_generic_plan; SET enable_seqscan = off; "
    "SET enable_nestloop = off; SET jit = off");
  apply_deadlines(*conn, deadlines_);
  for (auto name : prepared)
    conn->prepare(name, named_query(name));
  conn_ = std::move(conn);
}

void inbox_store::disconnect() {
  conn_.reset();
}

std::vector<std::string> inbox_store::migrate() {
  // A migration may rewrite a large table or wait for an older node's
  // transaction: it runs without the session's deadlines.
  apply_deadlines(*conn_, session_deadlines{});
  auto applied = apply_migrations(*conn_);
  apply_deadlines(*conn_, deadlines_);
  return applied;
}

int inbox_store::ensure_partitions(uint32_t ahead) {
  pqxx::nontransaction tx{*conn_};
  return tx
    .exec_params1("SELECT butlers_ensure_inbox_partitions($1)",
                  static_cast<int>(ahead))[0]
    .as<int>();
}

std::vector<std::string> inbox_store::drop_partitions(uint32_t months) {
  pqxx::work tx{*conn_};
  std::vector<std::string> dropped;
  for (auto row : tx.exec_params("SELECT butlers_drop_inbox_partitions($1)",
                                 static_cast<int>(months)))
    dropped.push_back(row[0].as<std::string>());
  tx.commit();
  return dropped;
}

void inbox_store::ping() {
  pqxx::nontransaction{*conn_}.exec("SELECT 1");
}

write_result inbox_store::write(const write_batch& b) {
  write_result result;
  if (b.size() == b.appends.size()) {
    // Appends alone (the append lane's batches): their one statement is
    // atomic on its own, so it runs as its own transaction, one round trip
    // instead of three (BEGIN, the statement, COMMIT), and PostgreSQL has
    // committed it when the answer arrives. The dedupe lookup that may
    // follow only reads rows committed before it.
    pqxx::nontransaction tx{*conn_};
    try {
      if (!b.appends.empty())
        write_appends(tx, b.appends, result.appends, true);
    } catch (const pqxx::broken_connection& e) {
      // The statement commits by itself: when the connection broke
      // during it (or the lookup after it), it may have. Nothing is
      // acknowledged; clients retry and dedupe finds what was stored.
      throw pqxx::in_doubt_error{e.what()};
    }
    return result;
  }
  pqxx::work tx{*conn_};
  if (!b.appends.empty())
    write_appends(tx, b.appends, result.appends, false);
  if (!b.claims.empty())
    write_claims(tx, b.claims, result.claims);
  if (!b.completions.empty())
    write_completions(tx, b.completions, result.completions);
  if (!b.work.empty())
    write_work(tx, b.work, result.work);
  if (!b.named.empty())
    result.named = run_named(tx, b.named, true);
  tx.commit();
  return result;
}

void inbox_store::write_appends(pqxx::transaction_base& tx,
                                const std::vector<inbox_record>& in,
                                std::vector<append_result>& out,
                                bool committed) {
  // Within the batch, the first occurrence of a dedupe key is the candidate;
  // later ones are its duplicates whatever the database says.
  std::unordered_map<std::string_view, size_t> first;
  std::vector<size_t> candidates;
  for (size_t i = 0; i < in.size(); ++i)
    if (first.emplace(in[i].dedupe_key, i).second)
      candidates.push_back(i);
  std::sort(candidates.begin(), candidates.end(), [&](size_t x, size_t y) {
    return in[x].dedupe_key < in[y].dedupe_key;
  });
  using el = pg_array::element;
  pg_array ids{el::uuid}, received{el::int8}, channel{el::text},
    endpoint{el::text}, sender{el::text}, thread{el::text}, trace{el::text},
    raw{el::text}, text{el::text}, tier{el::text}, version{el::text},
    keys{el::text}, trace_state{el::text};
  for (auto i : candidates) {
    auto& r = in[i];
    auto& ctx = r.context;
    ids.add(ctx.request_id);
    received.add(ctx.received_at_us);
    channel.add(ctx.source_channel);
    endpoint.add(ctx.source_endpoint_identity);
    sender.add(ctx.source_sender_identity);
    thread.add_or_null(ctx.source_thread_identity);
    trace.add_or_null(ctx.trace_parent);
    raw.add(r.raw_payload);
    text.add(r.normalized_text);
    tier.add(r.policy_tier.empty() ? "default" : r.policy_tier);
    version.add(r.schema_version);
    keys.add(r.dedupe_key);
    trace_state.add_or_null(ctx.trace_state);
  }
  auto fresh = tx.exec_prepared("inbox_append", ids.take(), received.take(),
                                channel.take(), endpoint.take(), sender.take(),
                                thread.take(), trace.take(), raw.take(),
                                text.take(), tier.take(), version.take(),
                                keys.take(), trace_state.take());
  std::unordered_map<std::string, std::string> canonical;
  std::unordered_map<std::string_view, bool> is_new;
  for (auto row : fresh)
    is_new.emplace(in[first.at(row[0].as<std::string>())].dedupe_key, true);
  pg_array dup_keys{pg_array::element::text};
  for (auto i : candidates)
    if (is_new.count(in[i].dedupe_key) == 0)
      dup_keys.add(in[i].dedupe_key);
  bool lookup_failed = false;
  if (dup_keys.size() > 0) {
    try {
      for (auto row : tx.exec_prepared("inbox_lookup_dedupe", dup_keys.take()))
        canonical.emplace(row[0].as<std::string>(), row[1].as<std::string>());
    } catch (const pqxx::sql_error&) {
      if (!committed)
        throw; // the appends roll back with it; the caller retries
      // The appends are committed already: answer the new ones, and the
      // duplicates with a storage error (empty result) that their clients
      // retry, when the lookup finds the originals.
      lookup_failed = true;
    }
  }
  out.resize(in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    auto& key = in[i].dedupe_key;
    auto j = first.at(key);
    if (i == j && is_new.count(key) > 0) {
      out[i] = stored_as(in[i].context.request_id, false);
    } else if (is_new.count(key) > 0) {
      out[i] = stored_as(in[j].context.request_id, true);
    } else if (lookup_failed) {
      out[i] = append_result{};
    } else {
      auto k = canonical.find(key);
      // A key that was neither new nor found was removed between the two
      // statements (retention); fall back to the id we assigned.
      out[i] = stored_as(k != canonical.end() ? k->second
                                              : in[j].context.request_id,
                         true);
    }
  }
}

void inbox_store::write_claims(pqxx::work& tx, const std::vector<inbox_ref>& in,
                               std::vector<claim_result>& out) {
  pg_array ids{pg_array::element::uuid}, received{pg_array::element::int8};
  for (auto& ref : in) {
    ids.add(ref.request_id);
    received.add(ref.received_at_us);
  }
  std::unordered_map<std::string, claim_result> claimed;
  for (auto row : tx.exec_prepared("inbox_claim", ids.take(), received.take(),
                                   owner_, static_cast<int>(lease_s_))) {
    claim_result c;
    c.claimed = true;
    c.lease_token = row[1].as<int64_t>();
    auto& ctx = c.record.context;
    ctx.request_id = row[0].as<std::string>();
    ctx.received_at_us = row[2].as<int64_t>();
    ctx.source_channel = row[3].as<std::string>();
    ctx.source_endpoint_identity = row[4].as<std::string>();
    ctx.source_sender_identity = row[5].as<std::string>();
    ctx.source_thread_identity = row[6].as<std::string>();
    ctx.trace_parent = row[7].as<std::string>();
    c.record.normalized_text = row[8].as<std::string>();
    c.record.policy_tier = row[9].as<std::string>();
    ctx.trace_state = row[10].as<std::string>();
    c.record.attachments = attachments_of_payload(row[11].as<std::string>());
    claimed.emplace(ctx.request_id, std::move(c));
  }
  out.clear();
  for (auto& ref : in) {
    auto i = claimed.find(ref.request_id);
    if (i == claimed.end()) {
      out.push_back(claim_result{});
    } else {
      out.push_back(std::move(i->second));
      // The same row twice in one batch is claimed once.
      claimed.erase(i);
    }
  }
}

void inbox_store::write_completions(pqxx::work& tx,
                                    const std::vector<completion>& in,
                                    std::vector<bool>& out) {
  using el = pg_array::element;
  pg_array ids{el::uuid}, received{el::int8}, tokens{el::int8},
    states{el::text}, classes{el::text}, messages{el::text}, outcomes{el::text},
    summaries{el::text};
  for (auto& c : in) {
    ids.add(c.ref.request_id);
    received.add(c.ref.received_at_us);
    tokens.add(c.lease_token);
    states.add(c.state);
    classes.add_or_null(c.error_class);
    messages.add_or_null(c.error_message);
    outcomes.add_or_null(c.dispatch_outcomes);
    summaries.add_or_null(c.response_summary);
  }
  std::unordered_map<std::string, bool> done;
  for (auto row :
       tx.exec_prepared("inbox_complete", ids.take(), received.take(),
                        tokens.take(), states.take(), classes.take(),
                        messages.take(), owner_, outcomes.take(),
                        summaries.take()))
    done.emplace(row[0].as<std::string>(), true);
  out.clear();
  for (auto& c : in)
    out.push_back(done.count(c.ref.request_id) > 0);
}

namespace {

work_item item_of(const pqxx::row& row) {
  work_item x;
  x.work_id = row[0].as<std::string>();
  x.butler = row[1].as<std::string>();
  x.request_id = row[2].as<std::string>();
  x.segment_id = row[3].as<std::string>();
  x.trigger_source = row[4].as<std::string>();
  x.origin_butler = row[5].as<std::string>();
  x.envelope = row[6].as<std::string>();
  x.lease_token = row[7].as<int64_t>();
  x.attempts = row[8].as<int32_t>();
  x.created_at_us = row[9].as<int64_t>();
  return x;
}

/// Named statements whose SQL is set-based: parameter i is a text array
/// holding the i-th parameter of every statement of the batch, in
/// submission order, and each result row starts with the 1-based ordinal of
/// the statement it belongs to. A batch runs each of them once, however many
/// statements it holds.
bool set_based(std::string_view query) {
  return query == "fanout_plan_store" || query == "fanout_segment_update";
}

/// Runs the statements `group` (all of one set-based query) as one
/// statement; their results go to `out` at the same positions.
void run_set_based(pqxx::transaction_base& tx,
                   const std::vector<const named_statement*>& group,
                   const std::vector<size_t>& positions,
                   std::vector<named_result>& out, bool prepared) {
  auto& query = group.front()->query;
  size_t arity = 0;
  for (auto* st : group)
    arity = std::max(arity, st->params.size());
  std::vector<pg_array> arrays(arity, pg_array{pg_array::element::text});
  for (auto* st : group)
    for (size_t i = 0; i < arity; ++i)
      arrays[i].add(i < st->params.size() ? st->params[i] : std::string{});
  std::vector<pqxx::binarystring> bound;
  bound.reserve(arity);
  for (auto& a : arrays)
    bound.push_back(a.take());
  auto params = pqxx::prepare::make_dynamic_params(bound);
  // The plan store reads each plan's segments with a lateral function call,
  // which only a nested loop can run (see `connect`).
  bool lateral = query == "fanout_plan_store";
  if (lateral)
    tx.exec("SET LOCAL enable_nestloop = on");
  auto rows = prepared ? tx.exec_prepared(query, params)
                       : tx.exec_params(named_query(query), params);
  if (lateral)
    tx.exec("SET LOCAL enable_nestloop = off");
  for (auto pos : positions)
    out[pos].ok = true;
  for (auto row : rows) {
    auto ord = row[0].as<size_t>();
    if (ord == 0 || ord > positions.size())
      continue;
    std::vector<std::string> cells;
    for (pqxx::row::size_type i = 1; i < row.size(); ++i)
      cells.push_back(row[i].is_null() ? std::string{} : row[i].c_str());
    out[positions[ord - 1]].rows.push_back(std::move(cells));
  }
}

} // namespace

named_result run_named(pqxx::transaction_base& tx, const named_statement& st) {
  named_result out;
  if (set_based(st.query)) {
    std::vector<named_result> one(1);
    run_set_based(tx, {&st}, {0}, one, false);
    return std::move(one[0]);
  }
  auto rows = tx.exec_params(named_query(st.query),
                             pqxx::prepare::make_dynamic_params(st.params));
  for (auto row : rows) {
    std::vector<std::string> cells;
    for (auto field : row)
      cells.push_back(field.is_null() ? std::string{} : field.c_str());
    out.rows.push_back(std::move(cells));
  }
  out.ok = true;
  return out;
}

std::vector<named_result> run_named(pqxx::transaction_base& tx,
                                    const std::vector<named_statement>& in,
                                    bool prepared) {
  std::vector<named_result> out(in.size());
  // Set-based queries collect their statements into one group each, run
  // when a statement of another kind comes (which must see them) or at the
  // end; other statements run one by one in between, in order.
  std::vector<std::string_view> order;
  std::unordered_map<std::string_view, std::vector<const named_statement*>>
    groups;
  std::unordered_map<std::string_view, std::vector<size_t>> positions;
  auto flush = [&] {
    for (auto q : order)
      run_set_based(tx, groups[q], positions[q], out, prepared);
    order.clear();
    groups.clear();
    positions.clear();
  };
  for (size_t i = 0; i < in.size(); ++i) {
    auto& st = in[i];
    if (set_based(st.query)) {
      auto& g = groups[st.query];
      if (g.empty())
        order.push_back(st.query);
      g.push_back(&st);
      positions[st.query].push_back(i);
      continue;
    }
    flush();
    out[i] = run_named(tx, st);
  }
  flush();
  return out;
}

static std::string own_prefix(const work_op& op) {
  auto slash = op.owner.find('/');
  if (!op.own || slash == std::string::npos)
    return {};
  return op.owner.substr(0, slash + 1);
}

void inbox_store::write_work(pqxx::work& tx, const std::vector<work_op>& in,
                             std::vector<work_result>& out) {
  // One statement per kind over arrays, in the order a work item lives:
  // recovery leases, new items, starts, renewals, results.
  auto& lease = replanned("work_lease");
  out.assign(in.size(), work_result{});
  std::vector<size_t> appends, starts, renews, finishes;
  for (size_t i = 0; i < in.size(); ++i) {
    auto& op = in[i];
    switch (op.kind) {
      case work_op_kind::append: appends.push_back(i); break;
      case work_op_kind::start: starts.push_back(i); break;
      case work_op_kind::renew: renews.push_back(i); break;
      case work_op_kind::finish: finishes.push_back(i); break;
      case work_op_kind::lease: {
        auto& r = out[i];
        // Planned now, with nested loops: its candidates come from a scan
        // ordered and limited, joined back by key (see `connect`).
        tx.exec("SET LOCAL enable_nestloop = on");
        for (auto row :
             tx.exec_params(lease, op.item.butler,
                            op.owner.empty() ? owner_ : op.owner,
                            static_cast<int>(op.lease_s),
                            static_cast<int>(op.limit), own_prefix(op)))
          r.items.push_back(item_of(row));
        tx.exec("SET LOCAL enable_nestloop = off");
        r.ok = true;
        break;
      }
    }
  }
  if (!appends.empty())
    write_work_appends(tx, in, appends, out);
  using el = pg_array::element;
  // Fenced updates keyed by work id: which of `which` came back.
  auto fenced = [&](const char* name, const std::vector<size_t>& which,
                    auto&& bind) {
    pqxx::result rows = bind(name);
    std::unordered_map<std::string, int32_t> attempts;
    for (auto row : rows)
      attempts[row[0].as<std::string>()] = row.size() > 1 ? row[1].as<int32_t>()
                                                          : 0;
    for (auto i : which) {
      auto f = attempts.find(in[i].item.work_id);
      if (f == attempts.end())
        continue;
      out[i].ok = true;
      out[i].attempts = f->second;
      // Once each: the same item twice in a batch moved once.
      attempts.erase(f);
    }
  };
  auto tokens_and_leases = [&](const std::vector<size_t>& which) {
    pg_array ids{el::uuid}, tokens{el::int8}, leases{el::int8};
    for (auto i : which) {
      ids.add(in[i].item.work_id);
      tokens.add(in[i].item.lease_token);
      leases.add(static_cast<int64_t>(in[i].lease_s));
    }
    return std::make_tuple(ids.take(), tokens.take(), leases.take());
  };
  if (!starts.empty())
    fenced("work_start", starts, [&](const char* name) {
      auto [ids, tokens, leases] = tokens_and_leases(starts);
      return tx.exec_prepared(name, ids, tokens, leases);
    });
  if (!renews.empty())
    fenced("work_renew", renews, [&](const char* name) {
      auto [ids, tokens, leases] = tokens_and_leases(renews);
      return tx.exec_prepared(name, ids, tokens, leases);
    });
  // Results with usage or a prompt version go through work_finish_usage
  // (its columns and the daily totals); the rest (deliveries, the
  // benchmarks' scripted sessions) through the plain statement.
  std::vector<size_t> plain, metered;
  for (auto i : finishes)
    (in[i].prompt_version.empty() && !has_usage(in[i].usage) ? plain : metered)
      .push_back(i);
  if (!plain.empty())
    fenced("work_finish", plain, [&](const char* name) {
      pg_array ids{el::uuid}, tokens{el::int8}, states{el::text},
        responses{el::text}, classes{el::text};
      for (auto i : plain) {
        auto& op = in[i];
        ids.add(op.item.work_id);
        tokens.add(op.item.lease_token);
        states.add(op.state);
        responses.add(op.response);
        classes.add_or_null(op.error_class);
      }
      return tx.exec_prepared(name, ids.take(), tokens.take(), states.take(),
                              responses.take(), classes.take());
    });
  if (!metered.empty())
    fenced("work_finish_usage", metered, [&](const char* name) {
      return finish_with_usage(tx, name, in, metered);
    });
}

pqxx::result inbox_store::finish_with_usage(pqxx::work& tx, const char* name,
                                            const std::vector<work_op>& in,
                                            const std::vector<size_t>& which) {
  using el = pg_array::element;
  pg_array ids{el::uuid}, tokens{el::int8}, states{el::text},
    responses{el::text}, classes{el::text}, models{el::text},
    versions{el::text}, input{el::int8}, output{el::int8}, cache_read{el::int8},
    cache_write{el::int8}, cost{el::text}, calls{el::int8}, senders{el::text};
  auto count = [](uint64_t x) {
    return static_cast<int64_t>(
      std::min<uint64_t>(x, std::numeric_limits<int64_t>::max()));
  };
  for (auto i : which) {
    auto& op = in[i];
    auto& u = op.usage;
    ids.add(op.item.work_id);
    tokens.add(op.item.lease_token);
    states.add(op.state);
    responses.add(op.response);
    classes.add_or_null(op.error_class);
    models.add_or_null(u.model);
    versions.add_or_null(op.prompt_version);
    senders.add(op.sender);
    // A session that reported nothing (refused by a budget, or a runtime
    // that says nothing) has no usage: NULL, not zeros.
    if (!has_usage(u)) {
      for (auto* a :
           {&input, &output, &cache_read, &cache_write, &cost, &calls})
        a->null();
      continue;
    }
    input.add(count(u.input_tokens));
    output.add(count(u.output_tokens));
    cache_read.add(count(u.cache_read_tokens));
    cache_write.add(count(u.cache_write_tokens));
    char cost_text[32];
    std::snprintf(cost_text, sizeof cost_text, "%.17g", u.cost_usd);
    cost.add_or_null(u.cost_known ? cost_text : "");
    calls.add(static_cast<int64_t>(u.calls));
  }
  return tx.exec_prepared(name, ids.take(), tokens.take(), states.take(),
                          responses.take(), classes.take(), models.take(),
                          versions.take(), input.take(), output.take(),
                          cache_read.take(), cache_write.take(), cost.take(),
                          calls.take(), senders.take());
}

void inbox_store::write_work_appends(pqxx::work& tx,
                                     const std::vector<work_op>& in,
                                     const std::vector<size_t>& which,
                                     std::vector<work_result>& out) {
  // The first op of a (butler, request, segment) key is its candidate;
  // later ones in the batch are its duplicates.
  auto key_of = [&](size_t i) {
    auto& it = in[i].item;
    return it.butler + '\x1f' + it.request_id + '\x1f' + it.segment_id;
  };
  std::unordered_map<std::string, size_t> first;
  std::vector<size_t> candidates;
  for (auto i : which)
    if (first.emplace(key_of(i), i).second)
      candidates.push_back(i);
  using el = pg_array::element;
  pg_array ids{el::uuid}, butler{el::text}, request{el::uuid},
    segment{el::text}, subrequest{el::text}, trigger{el::text},
    origin{el::text}, envelope{el::text}, owner{el::text}, lease{el::int8},
    start{el::int8};
  for (auto i : candidates) {
    auto& op = in[i];
    auto& it = op.item;
    ids.add(it.work_id);
    butler.add(it.butler);
    request.add(it.request_id);
    segment.add(it.segment_id);
    subrequest.add_or_null(it.subrequest_id);
    trigger.add(it.trigger_source);
    origin.add_or_null(it.origin_butler);
    envelope.add(it.envelope);
    owner.add(op.owner.empty() ? owner_ : op.owner);
    lease.add(static_cast<int64_t>(op.lease_s));
    start.add(int64_t{op.start ? 1 : 0});
  }
  auto rows = tx.exec_prepared("work_append", ids.take(), butler.take(),
                               request.take(), segment.take(),
                               subrequest.take(), trigger.take(), origin.take(),
                               envelope.take(), owner.take(), lease.take(),
                               start.take());
  std::unordered_map<std::string, work_result> found;
  for (auto row : rows) {
    work_result r;
    r.ok = true;
    r.duplicate = !row[4].as<bool>();
    r.state = row[5].as<std::string>();
    r.response = row[6].as<std::string>();
    work_item stored;
    stored.work_id = row[0].as<std::string>();
    stored.lease_token = row[1].as<int64_t>();
    stored.attempts = row[2].as<int32_t>();
    stored.created_at_us = row[3].as<int64_t>();
    r.items.push_back(std::move(stored));
    found.emplace(row[7].as<std::string>(), std::move(r));
  }
  for (auto i : candidates) {
    auto& it = in[i].item;
    auto f = found.find(it.work_id);
    if (f == found.end()) {
      // Inserted concurrently, after the statement's snapshot.
      auto again = tx.exec_params(
        "SELECT work_id::text, lease_token, attempts, "
        "(extract(epoch FROM created_at) * 1000000)::bigint, "
        "state, coalesce(response::text, '') "
        "FROM route_work WHERE butler = $1 AND request_id = $2::uuid "
        "AND segment_id = $3",
        it.butler, it.request_id, it.segment_id);
      if (again.empty())
        continue; // out[i].ok stays false
      work_result r;
      r.ok = true;
      r.duplicate = true;
      r.state = again[0][4].as<std::string>();
      r.response = again[0][5].as<std::string>();
      work_item stored;
      stored.work_id = again[0][0].as<std::string>();
      stored.lease_token = again[0][1].as<int64_t>();
      stored.attempts = again[0][2].as<int32_t>();
      stored.created_at_us = again[0][3].as<int64_t>();
      r.items.push_back(std::move(stored));
      f = found.emplace(it.work_id, std::move(r)).first;
    }
    auto& r = f->second;
    auto stored = it;
    auto& got = r.items.front();
    stored.work_id = got.work_id;
    stored.lease_token = got.lease_token;
    stored.attempts = got.attempts;
    stored.created_at_us = got.created_at_us;
    out[i] = r;
    out[i].items = {std::move(stored)};
  }
  // Duplicates within the batch: the candidate's item, as a duplicate.
  for (auto i : which) {
    auto j = first.at(key_of(i));
    if (i == j || !out[j].ok)
      continue;
    out[i] = out[j];
    out[i].duplicate = true;
  }
}

write_result inbox_store::write_each(const write_batch& b) {
  write_result result;
  // Writes each element of one kind in its own transaction: a statement
  // error marks that element `failed`, a connection error propagates.
  auto each = [&](auto in, auto out, auto failed) {
    for (auto& item : b.*in) {
      write_batch one;
      (one.*in).push_back(item);
      try {
        auto r = write(one);
        (result.*out).push_back((r.*out)[0]);
      } catch (const pqxx::broken_connection&) {
        throw;
      } catch (const pqxx::in_doubt_error&) {
        throw;
      } catch (const std::exception&) {
        (result.*out).push_back(failed);
      }
    }
  };
  each(&write_batch::appends, &write_result::appends, append_result{});
  each(&write_batch::claims, &write_result::claims, claim_result{});
  each(&write_batch::completions, &write_result::completions, false);
  each(&write_batch::work, &write_result::work, work_result{});
  each(&write_batch::named, &write_result::named, named_result{});
  return result;
}

std::vector<inbox_record> inbox_store::scan(uint32_t grace_s, uint32_t limit,
                                            int64_t after_us) {
  pqxx::work tx{*conn_};
  // Planned now, with nested loops (see `connect`).
  tx.exec("SET LOCAL enable_nestloop = on");
  std::vector<inbox_record> out;
  for (auto row :
       tx.exec_params(replanned("inbox_scan"), static_cast<int>(grace_s),
                      static_cast<int>(limit), after_us)) {
    inbox_record r;
    auto& ctx = r.context;
    ctx.request_id = row[0].as<std::string>();
    ctx.received_at_us = row[1].as<int64_t>();
    ctx.source_channel = row[2].as<std::string>();
    ctx.source_endpoint_identity = row[3].as<std::string>();
    ctx.source_sender_identity = row[4].as<std::string>();
    ctx.source_thread_identity = row[5].as<std::string>();
    ctx.trace_parent = row[6].as<std::string>();
    r.normalized_text = row[7].as<std::string>();
    r.policy_tier = row[8].as<std::string>();
    ctx.trace_state = row[9].as<std::string>();
    out.push_back(std::move(r));
  }
  tx.commit();
  return out;
}

} // namespace butlers
