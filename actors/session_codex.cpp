// Sessions of runtime kind `cli`, family `codex`: one `codex app-server`
// process per run, spoken to over stdio (runtime/codex_app_server). The
// process's own thread (subprocess::wait) reads its lines and drives the
// conversation; steer input reaches it from the session through the
// adapter's steer_box. Everything the session needs to hear goes by
// message: delta_atom, usage_atom, steer_atom (applied input) and, once,
// done_atom.

#include <memory>
#include <mutex>
#include <string>
#include <utility>

#include <caf/blocking_actor.hpp>
#include <caf/send.hpp>
#include <caf/spawn_options.hpp>
#include <spdlog/spdlog.h>

#include "actors/session_adapters.hpp"
#include "runtime/codex_app_server.hpp"
#include "runtime/steer_box.hpp"
#include "runtime/subprocess.hpp"

namespace butlers {

namespace {

/// Sent as clientInfo.version.
constexpr const char* client_version = "0.1.0";

/// One run: the conversation, the process it talks to and the session it
/// reports to. Its calls come from the process's wait() thread (lines, the
/// exit) and from the session's thread (input, stop); a mutex orders them.
/// Writes only queue (subprocess::write_stdin), so nothing blocks under it.
class codex_run {
 public:
  codex_run(std::string prompt, session_actor me, std::string work_id,
            bool ask_approvals)
    : conv_(std::move(prompt), client_version, ask_approvals),
      me_(std::move(me)), work_id_(std::move(work_id)) {
    box_.on_push([this] {
      on_input();
    });
  }

  steer_box& box() {
    return box_;
  }

  /// Starts the handshake; the process's wait() may run before or after.
  void begin(std::shared_ptr<subprocess> proc) {
    std::lock_guard<std::mutex> guard{mtx_};
    proc_ = std::move(proc);
    codex_step step;
    conv_.start(step);
    act(step);
  }

  void on_line(std::string_view line) {
    std::lock_guard<std::mutex> guard{mtx_};
    codex_step step;
    conv_.on_line(line, step);
    act(step);
  }

  void on_input() {
    std::lock_guard<std::mutex> guard{mtx_};
    codex_step step;
    conv_.on_input(box_.take(), step);
    act(step);
  }

  /// The process ended (wait() returned).
  void on_exit(const subprocess_result& r, uint64_t max_output) {
    std::lock_guard<std::mutex> guard{mtx_};
    if (conv_.finished())
      return;
    codex_step step;
    conv_.on_exit(describe(r, max_output), step);
    if (step.done && r.outcome == subprocess_outcome::timed_out) {
      step.done->error_class = "timeout";
      step.done->retryable = true;
    }
    act(step);
  }

  /// The answer to approval request `key` (from the session).
  void answer(const std::string& key, bool approved) {
    std::lock_guard<std::mutex> guard{mtx_};
    if (!proc_)
      return;
    codex_step step;
    conv_.answer_approval(key, approved, step);
    act(step);
  }

  /// The session stops: no more input.
  void close() {
    box_.close();
  }

 private:
  static std::string describe(const subprocess_result& r, uint64_t max_output) {
    std::string why;
    switch (r.outcome) {
      case subprocess_outcome::exited:
        why = "exited with code " + std::to_string(r.exit_code);
        break;
      case subprocess_outcome::signaled:
        why = "killed by signal " + std::to_string(r.signal);
        break;
      case subprocess_outcome::timed_out:
        why = "it did not finish in time";
        break;
      case subprocess_outcome::output_limit:
        why = "output exceeded runtime.max_output_bytes ("
              + std::to_string(max_output) + ")";
        break;
      case subprocess_outcome::cancelled: why = "cancelled"; break;
      case subprocess_outcome::spawn_failed:
        return "could not start it: " + r.error;
    }
    return r.err.empty() ? why : why + ": " + r.err;
  }

  /// Carries out a step (with `mtx_` held).
  void act(codex_step& step) {
    for (auto& line : step.writes) {
      if (proc_->write_stdin(std::move(line) + "\n") == stdin_write::queued
          || step.done || conv_.finished())
        continue;
      // Its stdin is gone or full: this run cannot go on.
      codex_step failed;
      conv_.on_exit("stdin does not take input any more", failed);
      step.done = std::move(failed.done);
      break;
    }
    if (!step.delta.empty())
      caf::anon_send(me_, delta_atom_v, std::move(step.delta));
    if (step.usage)
      caf::anon_send(me_, usage_atom_v, std::move(*step.usage));
    for (auto& a : step.approvals)
      caf::anon_send(me_, approve_atom_v, std::move(a.key), std::move(a.tool),
                     std::move(a.summary));
    for (auto& applied : step.applied) {
      applied.work_id = work_id_;
      applied.applied_us = unix_now_us();
      caf::anon_send(me_, steer_atom_v, std::move(applied));
    }
    if (step.done) {
      box_.close();
      proc_->close_stdin();
      auto& u = step.done->usage;
      spdlog::info("codex session {}: {}, {} turns, model {}, tokens in {} "
                   "out {} cache read {}",
                   work_id_, step.done->ok ? "answered" : "failed", u.calls,
                   u.model.empty() ? "unknown" : u.model, u.input_tokens,
                   u.output_tokens, u.cache_read_tokens);
      caf::anon_send(me_, done_atom_v, std::move(*step.done));
    }
  }

  std::mutex mtx_;
  codex_conversation conv_;
  session_actor me_;
  std::string work_id_;
  std::shared_ptr<subprocess> proc_;
  steer_box box_;
};

class codex_adapter final : public session_adapter {
 public:
  void start(session_ptr self) override {
    auto& st = self->state;
    auto& rt = st.params.runtime;
    auto me = session_actor{self};
    auto prompt = cli_prompt(st.params.butler, st.env)
                  + attachment_file_list(attachment_refs(st.attachments),
                                         st.attachment_paths);
    run_ = std::make_shared<codex_run>(std::move(prompt), me, st.item.work_id,
                                       st.params.approvals.active());
    // Input that waited for the run joins its first turn.
    on_steer(self);
    subprocess_options opts;
    opts.argv = rt.command.empty()
                  ? std::vector<std::string>{"codex", "app-server"}
                  : rt.command;
    opts.keep_stdin_open = true;
    // The run outlives wait(): the thread below holds it.
    auto* run = run_.get();
    opts.on_stdout_line = [run](std::string_view line) {
      run->on_line(line);
    };
    opts.env.emplace_back("BUTLERS_BUTLER", st.params.butler);
    opts.env.emplace_back("BUTLERS_REQUEST_ID", st.env.request_id);
    opts.env.emplace_back("BUTLERS_WORK_ID", st.item.work_id);
    add_session_tools(self, cli_family::codex, opts.argv, opts.env);
    opts.timeout = st.params.timeout;
    opts.max_output_bytes = rt.max_output_bytes;
    opts.max_line_bytes = rt.max_output_bytes;
    opts.kill_grace = std::chrono::milliseconds{rt.kill_grace_ms};
    proc_ = std::make_shared<subprocess>(std::move(opts));
    auto proc = proc_;
    // The group dies with the session, whatever ends it.
    self->attach_functor([proc] {
      proc->cancel();
    });
    run_->begin(proc_);
    // wait() blocks: it runs on a thread of its own, never on the scheduler
    // (everything travels as spawn arguments, see cli_adapter).
    self->spawn<caf::detached>(
      [](caf::blocking_actor*, std::shared_ptr<subprocess> proc,
         std::shared_ptr<codex_run> run, uint64_t max_output) {
        auto r = proc->wait();
        run->on_exit(r, max_output);
      },
      proc_, run_, static_cast<uint64_t>(rt.max_output_bytes));
  }

  void on_steer(session_ptr self) override {
    auto& inbox = self->state.steer_inbox;
    if (!run_)
      return;
    for (auto& in : inbox)
      run_->box().push(std::move(in));
    inbox.clear();
  }

  void on_approval(const std::string& key, bool approved) override {
    if (run_)
      run_->answer(key, approved);
  }

  void stop() override {
    if (run_)
      run_->close();
    if (proc_)
      proc_->cancel();
  }

 private:
  std::shared_ptr<codex_run> run_;
  std::shared_ptr<subprocess> proc_;
};

} // namespace

std::unique_ptr<session_adapter> make_codex_adapter() {
  return std::make_unique<codex_adapter>();
}

} // namespace butlers
