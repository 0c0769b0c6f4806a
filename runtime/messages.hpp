#pragma once

// Message types that cross actor boundaries (and, for remote actors, node
// boundaries): plain structs, so logic under runtime/ can build them without
// an actor system. Each has an inspect() and a type ID in
// actors/type_ids.hpp; test/unit/serialization_test.cpp round-trips every
// one of them through CAF's binary serializer.

#include <cstdint>
#include <string>
#include <vector>

#include <caf/meta/type_name.hpp>

#include "runtime/request_context.hpp"

namespace butlers {

/// Health of the database connection as the inbox writer sees it.
struct db_status {
  /// A connection is open and answered its last statement.
  bool connected = false;
  /// Every embedded migration is applied.
  bool migrated = false;
  /// The last connection or statement error, empty when healthy.
  std::string last_error;
  /// Transactions committed since start.
  uint64_t commits = 0;
  /// Rows written since start.
  uint64_t rows = 0;
};

template<class Inspector>
typename Inspector::result_type inspect(Inspector& f, db_status& x) {
  return f(caf::meta::type_name("db_status"), x.connected, x.migrated,
           x.last_error, x.commits, x.rows);
}

/// A validated ingest request on its way into `message_inbox`.
struct inbox_record {
  /// Context assigned at the ingest boundary (request_id is a UUIDv7).
  request_context context;
  /// The channel-aware dedupe key (spec 001 §10.2).
  std::string dedupe_key;
  /// The `ingest.v1` envelope as received (JSON text).
  std::string raw_payload;
  /// `payload.normalized_text`.
  std::string normalized_text;
  /// `policy_tier` of the envelope's control block.
  std::string policy_tier;
  /// Schema version of the stored payload (`ingest.v1`).
  std::string schema_version;
};

template<class Inspector>
typename Inspector::result_type inspect(Inspector& f, inbox_record& x) {
  return f(caf::meta::type_name("inbox_record"), x.context, x.dedupe_key,
           x.raw_payload, x.normalized_text, x.policy_tier, x.schema_version);
}

/// The answer to appending an `inbox_record`: what is durable now.
struct append_result {
  /// The canonical request id: ours, or the original's for a duplicate.
  std::string request_id;
  /// True when the dedupe key was already stored (nothing new written).
  bool duplicate = false;
};

template<class Inspector>
typename Inspector::result_type inspect(Inspector& f, append_result& x) {
  return f(caf::meta::type_name("append_result"), x.request_id, x.duplicate);
}

/// A reference to a stored inbox row: enough to find it in its partition.
struct inbox_ref {
  /// The canonical request id (UUIDv7 text).
  std::string request_id;
  /// `received_at` in Unix microseconds (the partition key).
  int64_t received_at_us = 0;
};

template<class Inspector>
typename Inspector::result_type inspect(Inspector& f, inbox_ref& x) {
  return f(caf::meta::type_name("inbox_ref"), x.request_id, x.received_at_us);
}

/// The answer to a claim: `accepted`/expired `progress` → `progress`.
struct claim_result {
  /// False when someone else holds the row or it is already terminal.
  bool claimed = false;
  /// The fencing token every later write for this claim must present.
  int64_t lease_token = 0;
};

template<class Inspector>
typename Inspector::result_type inspect(Inspector& f, claim_result& x) {
  return f(caf::meta::type_name("claim_result"), x.claimed, x.lease_token);
}

/// A terminal transition of a claimed row: `parsed`, `errored` or
/// `cancelled`, applied only while the lease token still matches.
struct completion {
  inbox_ref ref;
  /// The token returned by the claim (fencing).
  int64_t lease_token = 0;
  /// `parsed`, `errored` or `cancelled`.
  std::string state;
  /// Error class of the taxonomy when `errored`, else empty.
  std::string error_class;
  /// Actionable message when `errored`, else empty.
  std::string error_message;
};

template<class Inspector>
typename Inspector::result_type inspect(Inspector& f, completion& x) {
  return f(caf::meta::type_name("completion"), x.ref, x.lease_token, x.state,
           x.error_class, x.error_message);
}

/// Everything one transaction of the inbox writes (a group commit).
struct write_batch {
  std::vector<inbox_record> appends;
  std::vector<inbox_ref> claims;
  std::vector<completion> completions;
  size_t size() const {
    return appends.size() + claims.size() + completions.size();
  }
};

template<class Inspector>
typename Inspector::result_type inspect(Inspector& f, write_batch& x) {
  return f(caf::meta::type_name("write_batch"), x.appends, x.claims,
           x.completions);
}

/// The outcome of each element of a `write_batch`, in the batch's order.
struct write_result {
  /// An empty request_id marks an element that failed on its own (a
  /// statement error isolated by retrying the batch element by element).
  std::vector<append_result> appends;
  /// Unclaimed where someone else holds the row, it is terminal, or the
  /// element failed.
  std::vector<claim_result> claims;
  /// False where the lease token no longer matched (lease lost).
  std::vector<bool> completions;
};

template<class Inspector>
typename Inspector::result_type inspect(Inspector& f, write_result& x) {
  return f(caf::meta::type_name("write_result"), x.appends, x.claims,
           x.completions);
}

} // namespace butlers
