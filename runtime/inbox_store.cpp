#include "runtime/inbox_store.hpp"

#include <algorithm>
#include <unordered_map>

#include <pqxx/pqxx>

#include "runtime/embedded.hpp"
#include "runtime/migrations.hpp"
#include "runtime/pg_array.hpp"

namespace butlers {

namespace {

/// Statements prepared once per connection: their plans cannot depend on
/// the tables' size (inserts, the dedupe arbiter index, joins of CTEs).
/// The route inbox's statements are single-row primary-key or unique-key
/// writes: their plan does not depend on the table's size either.
constexpr const char* prepared[] = {"inbox_append", "work_append", "work_start",
                                    "work_renew", "work_finish"};

/// Statements planned at every execution (unnamed, PQexecParams): they look
/// rows up in tables that start empty every month and grow fast. A generic
/// plan cached while a partition was small keeps seq-scanning it as it
/// grows (measured: throughput collapsed from 14k to 3k/s within one
/// 10-second run after a TRUNCATE).
const std::string& replanned(std::string_view name) {
  static const std::string lookup = named_query("inbox_lookup_dedupe");
  static const std::string claim = named_query("inbox_claim");
  static const std::string complete = named_query("inbox_complete");
  static const std::string scan = named_query("inbox_scan");
  if (name == "inbox_lookup_dedupe")
    return lookup;
  if (name == "inbox_claim")
    return claim;
  if (name == "inbox_complete")
    return complete;
  return scan;
}

} // namespace

inbox_store::inbox_store(std::string url, std::string owner, uint32_t lease_s)
  : url_(std::move(url)), owner_(std::move(owner)), lease_s_(lease_s) {
  // nop
}

inbox_store::~inbox_store() = default;

void inbox_store::connect() {
  conn_.reset();
  auto conn = std::make_unique<pqxx::connection>(url_);
  for (auto name : prepared)
    conn->prepare(name, named_query(name));
  conn_ = std::move(conn);
}

void inbox_store::disconnect() {
  conn_.reset();
}

std::vector<std::string> inbox_store::migrate() {
  return apply_migrations(*conn_);
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
  for (auto& st : b.named)
    result.named.push_back(run_named(tx, st));
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
    keys{el::text};
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
  }
  auto fresh = tx.exec_prepared("inbox_append", ids.take(), received.take(),
                                channel.take(), endpoint.take(), sender.take(),
                                thread.take(), trace.take(), raw.take(),
                                text.take(), tier.take(), version.take(),
                                keys.take());
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
      for (auto row :
           tx.exec_params(replanned("inbox_lookup_dedupe"), dup_keys.take()))
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
  for (auto row :
       tx.exec_params(replanned("inbox_claim"), ids.take(), received.take(),
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
    states{el::text}, classes{el::text}, messages{el::text};
  for (auto& c : in) {
    ids.add(c.ref.request_id);
    received.add(c.ref.received_at_us);
    tokens.add(c.lease_token);
    states.add(c.state);
    classes.add_or_null(c.error_class);
    messages.add_or_null(c.error_message);
  }
  std::unordered_map<std::string, bool> done;
  for (auto row : tx.exec_params(replanned("inbox_complete"), ids.take(),
                                 received.take(), tokens.take(), states.take(),
                                 classes.take(), messages.take(), owner_))
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

} // namespace

/// "NODE/" of an owner "NODE/INCARNATION" when `op.own`, else "".
named_result run_named(pqxx::transaction_base& tx, const named_statement& st) {
  named_result out;
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

static std::string own_prefix(const work_op& op) {
  auto slash = op.owner.find('/');
  if (!op.own || slash == std::string::npos)
    return {};
  return op.owner.substr(0, slash + 1);
}

void inbox_store::write_work(pqxx::work& tx, const std::vector<work_op>& in,
                             std::vector<work_result>& out) {
  // Work items arrive at the pace of sessions, not of ingest: one statement
  // each, all in the batch's one transaction.
  static const std::string lease = named_query("work_lease");
  out.clear();
  for (auto& op : in) {
    auto& it = op.item;
    auto lease_s = static_cast<int>(op.lease_s);
    work_result r;
    switch (op.kind) {
      case work_op_kind::append: {
        auto rows = tx.exec_prepared("work_append", it.work_id, it.butler,
                                     it.request_id, it.segment_id,
                                     it.subrequest_id, it.trigger_source,
                                     it.origin_butler, it.envelope,
                                     op.owner.empty() ? owner_ : op.owner,
                                     lease_s);
        if (rows.empty()) // inserted concurrently, after our snapshot
          rows = tx.exec_params(
            "SELECT work_id::text, lease_token, attempts, "
            "(extract(epoch FROM created_at) * 1000000)::bigint, false, "
            "state, coalesce(response::text, '') "
            "FROM route_work WHERE butler = $1 AND request_id = $2::uuid "
            "AND segment_id = $3",
            it.butler, it.request_id, it.segment_id);
        if (!rows.empty()) {
          auto stored = it;
          stored.work_id = rows[0][0].as<std::string>();
          stored.lease_token = rows[0][1].as<int64_t>();
          stored.attempts = rows[0][2].as<int32_t>();
          stored.created_at_us = rows[0][3].as<int64_t>();
          r.ok = true;
          r.duplicate = !rows[0][4].as<bool>();
          r.state = rows[0][5].as<std::string>();
          r.response = rows[0][6].as<std::string>();
          r.items.push_back(std::move(stored));
        }
        break;
      }
      case work_op_kind::start: {
        auto rows = tx.exec_prepared("work_start", it.work_id, it.lease_token,
                                     lease_s);
        r.ok = !rows.empty();
        if (r.ok)
          r.attempts = rows[0][0].as<int32_t>();
        break;
      }
      case work_op_kind::renew:
        r.ok = !tx.exec_prepared("work_renew", it.work_id, it.lease_token,
                                 lease_s)
                  .empty();
        break;
      case work_op_kind::finish:
        r.ok = !tx.exec_prepared("work_finish", it.work_id, it.lease_token,
                                 op.state, op.response, op.error_class)
                  .empty();
        break;
      case work_op_kind::lease:
        for (auto row :
             tx.exec_params(lease, it.butler,
                            op.owner.empty() ? owner_ : op.owner, lease_s,
                            static_cast<int>(op.limit), own_prefix(op)))
          r.items.push_back(item_of(row));
        r.ok = true;
        break;
    }
    out.push_back(std::move(r));
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

std::vector<inbox_ref> inbox_store::scan(uint32_t grace_s, uint32_t limit,
                                         int64_t after_us) {
  pqxx::nontransaction tx{*conn_};
  std::vector<inbox_ref> refs;
  for (auto row :
       tx.exec_params(replanned("inbox_scan"), static_cast<int>(grace_s),
                      static_cast<int>(limit), after_us))
    refs.push_back(inbox_ref{row[0].as<std::string>(), row[1].as<int64_t>()});
  return refs;
}

} // namespace butlers
