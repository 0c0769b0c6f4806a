#include "actors/delivery_services.hpp"

#include <chrono>
#include <optional>
#include <string>

#include <caf/scoped_actor.hpp>

#include "runtime/error.hpp"
#include "runtime/reaction_gate.hpp"
#include "runtime/typing_ticker.hpp"

namespace butlers {

namespace {

using namespace std::chrono_literals;

/// How long a delivery thread waits for the writer or the reader (both
/// answer every request; this bounds a wedged database).
constexpr auto call_timeout = 30s;

std::optional<int64_t> to_int(const std::string& x) {
  try {
    return x.empty() ? std::nullopt : std::optional<int64_t>{std::stoll(x)};
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

class db_delivery_services final : public delivery_services {
 public:
  db_delivery_services(caf::actor_system& sys, inbox_writer_actor writer,
                       node_context_ptr ctx,
                       std::shared_ptr<reaction_gate> gate)
    : sys_(sys), writer_(std::move(writer)), ctx_(std::move(ctx)),
      gate_(std::move(gate)) {
    auto metrics = ctx_;
    typing_ = std::make_unique<typing_ticker>(256, [metrics](
                                                     const char* outcome) {
      metrics->metrics
        .get_counter("butlers_messenger_chat_actions_total",
                     "Chat actions (Telegram sendChatAction \"typing\") "
                     "while a request is worked on: sent, failed, refused "
                     "(too many requests at once)",
                     std::string{"outcome=\""} + outcome + "\"")
        .inc();
    });
  }

  reaction_gate* reaction_order() override {
    return gate_.get();
  }

  typing_ticker* typing() override {
    return typing_.get();
  }

  void count_overtaken(const std::string& adapter) override {
    outbound_send s;
    s.adapter = adapter;
    s.kind = outbound_kind::reaction;
    count(s, "overtaken");
  }

  source_lookup source_payload(const std::string& request_id) override {
    source_lookup out;
    auto reader = ctx_->reader();
    if (!reader) {
      out.error = "no database reader";
      return out;
    }
    auto r = ask(reader, read_atom_v,
                 named_statement{"inbox_source_payload", {request_id}}, false,
                 out.error);
    if (!r)
      return out;
    out.ok = true;
    if (!r->rows.empty() && !r->rows[0].empty()) {
      out.found = true;
      out.raw_payload = std::move(r->rows[0][0]);
    }
    return out;
  }

  ledger_claim ledger_begin(const outbound_send& s) override {
    ledger_claim c;
    auto r = write(named_statement{"outbound_ledger_begin",
                                   {s.key.request_id, s.key.segment_id,
                                    s.key.part, s.adapter, to_string(s.kind),
                                    std::to_string(s.rank), s.value}},
                   c.error);
    if (!r)
      return c;
    auto& row = r->rows[0];
    c.ok = true;
    c.prior = ledger_state_of(row[0]);
    c.provider_id = row[1];
    c.top_rank = to_int(row[2]).value_or(s.rank);
    c.top_value = row[3];
    c.decision = decide_send(s.kind, c.prior, s.rank, c.top_rank);
    if (c.decision == send_decision::resend)
      ctx_->metrics
        .get_counter("butlers_messenger_redelivered_total",
                     "Outbound sends made again because an earlier run may "
                     "have made them (found 'sending' in the outbound "
                     "ledger, or retried after an answer that left it "
                     "open): the possible duplicates",
                     labels(s))
        .inc();
    if (c.decision == send_decision::skip)
      count(s, "skipped");
    return c;
  }

  ledger_mark ledger_end(const outbound_send& s, ledger_state outcome,
                         const std::string& provider_id) override {
    ledger_mark m;
    auto r = write(named_statement{"outbound_ledger_end",
                                   {s.key.request_id, s.key.segment_id,
                                    s.key.part, to_string(outcome), provider_id,
                                    to_string(s.kind)}},
                   m.error);
    if (!r)
      return m;
    auto& row = r->rows[0];
    m.ok = true;
    m.top_rank = to_int(row[1]).value_or(0);
    m.top_value = row[2];
    // Counted once per send, not per re-read of the ledger.
    if (ledger_state_of(row[0]) != outcome)
      count(s, outcome == ledger_state::sent ? "sent" : "superseded");
    return m;
  }

  bool ledger_dead(const outbound_send& s, const std::string& error_class,
                   const std::string& message) override {
    std::string error;
    auto r = write(named_statement{"outbound_ledger_dead",
                                   {s.key.request_id, s.key.segment_id,
                                    s.key.part, error_class, message}},
                   error);
    count(s, "dead");
    return r.has_value();
  }

 private:
  /// One request to `hdl`, waiting for its answer; nullopt (and `error`)
  /// when the request or the statement failed, or (`need_row`) the
  /// statement answered no row.
  template<class Handle, class Atom>
  std::optional<named_result> ask(const Handle& hdl, Atom atom,
                                  named_statement st, bool need_row,
                                  std::string& error) {
    std::optional<named_result> out;
    caf::scoped_actor self{sys_};
    auto query = st.query;
    self->request(hdl, call_timeout, atom, std::move(st))
      .receive(
        [&](named_result& r) {
          if (r.ok && (!need_row || !r.rows.empty()))
            out = std::move(r);
          else
            error = query + " failed";
        },
        [&](caf::error& err) {
          error = query + ": " + sys_.render(err);
        });
    return out;
  }

  std::optional<named_result> write(named_statement st, std::string& error) {
    return ask(writer_, exec_atom_v, std::move(st), true, error);
  }

  static std::string labels(const outbound_send& s) {
    return "adapter=\"" + s.adapter + "\",kind=\"" + to_string(s.kind) + "\"";
  }

  void count(const outbound_send& s, const char* outcome) {
    ctx_->metrics
      .get_counter("butlers_messenger_sends_total",
                   "Outbound sends by adapter, kind and outcome (sent, "
                   "skipped: sent by an earlier run, superseded: a reaction "
                   "outranked before it went out, overtaken: a reaction the "
                   "messenger dropped unsent, dead: failed for good)",
                   labels(s) + ",outcome=\"" + outcome + "\"")
      .inc();
  }

  caf::actor_system& sys_;
  inbox_writer_actor writer_;
  node_context_ptr ctx_;
  std::shared_ptr<reaction_gate> gate_;
  std::unique_ptr<typing_ticker> typing_;
};

} // namespace

std::shared_ptr<delivery_services> make_db_delivery_services(
  caf::actor_system& sys, inbox_writer_actor writer, node_context_ptr ctx,
  std::shared_ptr<reaction_gate> gate) {
  return std::make_shared<db_delivery_services>(sys, std::move(writer),
                                                std::move(ctx),
                                                std::move(gate));
}

} // namespace butlers
