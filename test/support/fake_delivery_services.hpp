#pragma once

// An in-memory `delivery_services` for unit tests of the messenger's
// adapters: source payloads set by the test, and a ledger with the same
// semantics as the SQL one (sql/queries/outbound_ledger_*.sql), which the
// test can inspect, pre-load (to stage a re-run after a crash) or make fail.

#include <algorithm>
#include <atomic>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "runtime/delivery_services.hpp"

namespace butlers::test {

class fake_delivery_services final : public delivery_services {
 public:
  /// A ledger row.
  struct row {
    std::string adapter;
    outbound_kind kind = outbound_kind::message;
    int64_t rank = 0;
    std::string value;
    ledger_state state = ledger_state::none;
    std::string provider_id;
    uint32_t attempts = 0;
    std::string error_class;
  };

  /// A dead letter as `ledger_dead` wrote it.
  struct dead_letter {
    std::string request_id;
    std::string segment_id;
    std::string error_class;
    std::string message;
  };

  using key_tuple = std::tuple<std::string, std::string, std::string>;

  // -- what the test sets up ------------------------------------------------

  /// The raw_payload of request `request_id`'s inbox row.
  void set_source(const std::string& request_id, std::string raw_payload) {
    std::lock_guard<std::mutex> guard{mtx_};
    sources_[request_id] = std::move(raw_payload);
  }

  /// Every call fails (the database is away) while set.
  void set_unavailable(bool x) {
    std::lock_guard<std::mutex> guard{mtx_};
    unavailable_ = x;
  }

  /// Called after each `ledger_begin` has answered (outside the lock), with
  /// the send: a test stages what happens meanwhile.
  void on_begin(std::function<void(const outbound_send&)> f) {
    std::lock_guard<std::mutex> guard{mtx_};
    on_begin_ = std::move(f);
  }

  /// Puts a row in the ledger (a run that died before it recorded a send).
  void preload(const outbound_key& k, row r) {
    std::lock_guard<std::mutex> guard{mtx_};
    rows_[tuple_of(k)] = std::move(r);
  }

  // -- what the test inspects -----------------------------------------------

  /// The row of `k`, if any.
  std::optional<row> find(const outbound_key& k) const {
    std::lock_guard<std::mutex> guard{mtx_};
    auto i = rows_.find(tuple_of(k));
    if (i == rows_.end())
      return std::nullopt;
    return i->second;
  }

  std::map<key_tuple, row> rows() const {
    std::lock_guard<std::mutex> guard{mtx_};
    return rows_;
  }

  std::vector<dead_letter> dead_letters() const {
    std::lock_guard<std::mutex> guard{mtx_};
    return dead_;
  }

  /// Sends re-made because an earlier run left them `sending`.
  uint64_t redelivered() const {
    std::lock_guard<std::mutex> guard{mtx_};
    return redelivered_;
  }

  // -- delivery_services
  // --------------------------------------------------------

  source_lookup source_payload(const std::string& request_id) override {
    std::lock_guard<std::mutex> guard{mtx_};
    source_lookup out;
    if (unavailable_) {
      out.error = "database unavailable";
      return out;
    }
    out.ok = true;
    auto i = sources_.find(request_id);
    if (i != sources_.end()) {
      out.found = true;
      out.raw_payload = i->second;
    }
    return out;
  }

  ledger_claim ledger_begin(const outbound_send& s) override {
    auto c = begin(s);
    std::function<void(const outbound_send&)> hook;
    {
      std::lock_guard<std::mutex> guard{mtx_};
      hook = on_begin_;
    }
    if (hook)
      hook(s);
    return c;
  }

  ledger_mark ledger_end(const outbound_send& s, ledger_state outcome,
                         const std::string& provider_id) override {
    std::lock_guard<std::mutex> guard{mtx_};
    ledger_mark m;
    if (unavailable_) {
      m.error = "database unavailable";
      return m;
    }
    m.ok = true;
    auto& r = rows_[tuple_of(s.key)];
    r.state = outcome;
    r.provider_id = provider_id;
    std::tie(m.top_rank, m.top_value) = top(s, 0, {});
    return m;
  }

  bool ledger_dead(const outbound_send& s, const std::string& error_class,
                   const std::string& message) override {
    std::lock_guard<std::mutex> guard{mtx_};
    if (unavailable_)
      return false;
    auto& r = rows_[tuple_of(s.key)];
    r.state = ledger_state::dead;
    r.error_class = error_class;
    dead_.push_back(
      dead_letter{s.key.request_id, s.key.segment_id, error_class, message});
    return true;
  }

  // -- the messenger's order of reactions and chat actions -------------------

  /// Answered by `reaction_order()` (none by default).
  void use_gate(reaction_gate* gate) {
    gate_ = gate;
  }

  /// Answered by `typing()` (none by default).
  void use_typing(typing_ticker* ticker) {
    typing_ = ticker;
  }

  reaction_gate* reaction_order() override {
    return gate_;
  }

  typing_ticker* typing() override {
    return typing_;
  }

  void count_overtaken(const std::string&) override {
    ++overtaken_;
  }

  /// Reactions dropped as overtaken (`count_overtaken`).
  int overtaken() const {
    return overtaken_;
  }

 private:
  reaction_gate* gate_ = nullptr;
  typing_ticker* typing_ = nullptr;
  std::atomic<int> overtaken_{0};

  ledger_claim begin(const outbound_send& s) {
    std::lock_guard<std::mutex> guard{mtx_};
    ledger_claim c;
    if (unavailable_) {
      c.error = "database unavailable";
      return c;
    }
    c.ok = true;
    auto& r = rows_[tuple_of(s.key)];
    c.prior = r.state;
    c.provider_id = r.provider_id;
    if (r.state == ledger_state::none) {
      r.adapter = s.adapter;
      r.kind = s.kind;
      r.rank = s.rank;
      r.value = s.value;
    }
    if (r.state != ledger_state::sent && r.state != ledger_state::skipped)
      r.state = ledger_state::sending;
    ++r.attempts;
    std::tie(c.top_rank, c.top_value) = top(s, s.rank, s.value);
    c.decision = decide_send(s.kind, c.prior, s.rank, c.top_rank);
    if (c.decision == send_decision::resend)
      ++redelivered_;
    return c;
  }

  static key_tuple tuple_of(const outbound_key& k) {
    return {k.request_id, k.segment_id, k.part};
  }

  /// The highest-ranked live reaction of `s`'s request, at least
  /// (rank, value).
  std::pair<int64_t, std::string> top(const outbound_send& s, int64_t rank,
                                      std::string value) const {
    if (s.kind != outbound_kind::reaction)
      return {0, {}};
    for (auto& [k, r] : rows_)
      if (std::get<0>(k) == s.key.request_id
          && r.kind == outbound_kind::reaction && r.state != ledger_state::dead
          && r.rank > rank) {
        rank = r.rank;
        value = r.value;
      }
    return {rank, std::move(value)};
  }

  mutable std::mutex mtx_;
  bool unavailable_ = false;
  std::function<void(const outbound_send&)> on_begin_;
  std::map<std::string, std::string> sources_;
  std::map<key_tuple, row> rows_;
  std::vector<dead_letter> dead_;
  uint64_t redelivered_ = 0;
};

} // namespace butlers::test
