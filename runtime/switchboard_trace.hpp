#pragma once

// The switchboard's spans (spec 001 §12.3): what the switchboard actor calls
// at each step of a request, turned into spans of the request's trace
// (runtime/tracing.hpp). A plain class, so the span tree is unit-tested
// without actors; the actor owns one and calls it from one line per step.
//
// The tree of one request (all children of the root):
//   butlers.switchboard.message            received_at .. terminal write
//   ├ ingress.normalize                     received_at .. the switchboard has
//   │                                       the record (envelope parsed, text
//   │                                       normalized, dedupe key computed)
//   ├ ingress.dedupe                        the inbox append's key check
//   ├ persistence.write  (inbox_append)     the inbox append
//   ├ routing.rules_decision | routing.llm_decision
//   │                                       a worker took it .. plan made
//   ├ routing.plan_fanout                   plan made .. plan stored, fanout on
//   ├ persistence.write  (plan)             the same interval (stored with it)
//   ├ lifecycle.signal   (progress)         the progress transition
//   ├ route.dispatch     (one per attempt)  sent .. its outcome; its context
//   │                                       is the route.v1 traceparent
//   ├ route.aggregate                       fanout on .. every segment settled
//   ├ lifecycle.signal   (parsed|errored)   terminal reaction/reply handed over
//   └ persistence.write  (inbox_complete)   the terminal transition
//
// Everything is a no-op (one branch) when the tracer is disabled, and spans
// of unsampled traces are not built. State is kept per request in progress
// only (bounded by `max_entries`; beyond it a request is not traced).

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>

#include "runtime/config_enums.hpp"
#include "runtime/messages.hpp"
#include "runtime/request_tracker.hpp"
#include "runtime/routing_plan.hpp"
#include "runtime/tracing.hpp"

namespace butlers {

/// Prefix of every switchboard span name.
inline constexpr std::string_view switchboard_span_prefix = "butlers."
                                                            "switchboard.";

class switchboard_tracing {
 public:
  /// Off (no tracer).
  switchboard_tracing() = default;

  /// Spans go to `t` (may be null or disabled: then all calls are no-ops).
  /// `router` names the decision span and the root's model family.
  switchboard_tracing(tracer_ptr t, router_kind router, cli_family family,
                      std::string fanout_mode, size_t max_entries = 65536);

  bool on() const {
    return on_;
  }

  /// The inbox append of a batch answered: for a new request (not a
  /// duplicate), records normalize, dedupe and the append's write. `rec`
  /// may be null (nothing is recorded then).
  /// `handed_ns`: when the switchboard got the batch; `batch_size`: records
  /// in the append.
  void stored(const inbox_record* rec, const std::string& dedupe_key,
              uint64_t handed_ns, size_t batch_size, bool duplicate);

  /// A worker took the request: the routing decision starts.
  void started(const std::string& request_id);

  /// The plan is made (policy applied): ends the decision span, starts
  /// plan_fanout.
  void planned(const inbox_record& rec, const routing_plan& plan,
               const std::string& statement);

  /// The plan is stored and the fanout starts; `reacts`: the progress
  /// transition goes to the source channel.
  void fanned_out(const std::string& request_id, bool reacts);

  /// An attempt goes out: opens its dispatch span and sets the envelope's
  /// traceparent to that span's context.
  void dispatching(dispatch_order& d);

  /// The butler answered at its door: anything but `accepted` ends the
  /// attempt's span.
  void door_answer(const std::string& request_id, const std::string& attempt_id,
                   const route_response& r);

  /// An attempt's outcome (`r.segment_id` is the attempt id).
  void outcome(const route_response& r);

  /// Every segment settled (the tracker finished the request); `owes`:
  /// a reaction or reply goes to the messenger first.
  void finished(const finished_request& f, bool owes);

  /// What the request owed is handed over (`owed`) or could not be.
  void handed_over(const std::string& request_id, bool owed);

  /// The terminal transition is written (`applied`), lost the lease
  /// (!applied), or failed (`error` not empty): ends the root.
  void completed(const std::string& request_id, bool applied,
                 std::string_view error = {});

  /// The request is no longer tracked here: open spans end as abandoned.
  void forget(const std::string& request_id);

  /// Drops the state of requests that never reached their fanout here
  /// within `stale_ns` of starting (their claim or plan failed; the cold
  /// path or another node takes them again). Called every second.
  void expire(uint64_t now_ns, uint64_t stale_ns = 300000000000ull);

  /// Requests with state (tests).
  size_t size() const {
    return entries_.size();
  }

 private:
  struct entry {
    request_trace trace;
    bool known = false; // trace and context set (planned)
    request_context context;
    std::string policy_tier;
    std::string schema_version;
    uint64_t routing_ns = 0;
    uint64_t planned_ns = 0;
    std::string plan_statement;
    size_t segments = 0;
    bool fallback = false;
    uint64_t fanout_ns = 0;
    uint64_t finished_ns = 0;
    uint64_t handed_ns = 0;
    std::string state;
    std::string error_class;
    std::unordered_map<std::string, span> dispatches; // by attempt id
  };

  entry* find(const std::string& request_id);
  entry* find_or_add(const std::string& request_id);
  void emit(span&& s);
  span child(const entry& e, std::string_view name, uint64_t start_ns) const;
  void end_dispatch(entry& e, const std::string& attempt_id,
                    const route_response* r, std::string_view outcome);
  void end_root(entry& e, uint64_t end_ns);

  tracer_ptr tracer_;
  bool on_ = false;
  std::string decision_name_;
  std::string model_family_;
  std::string prompt_version_;
  std::string fanout_mode_;
  size_t max_entries_ = 65536;
  std::unordered_map<std::string, entry> entries_;
};

} // namespace butlers
