#include "actors/cli_router.hpp"

#include <caf/actor_system.hpp>
#include <caf/spawn_options.hpp>
#include <caf/typed_event_based_actor.hpp>

#include "runtime/cli_output.hpp"

namespace butlers {

namespace {

/// Waits for the process (blocking: only on the detached runner) and reads
/// its answer.
adapter_result wait_for_answer(subprocess& proc, cli_family family) {
  adapter_result a;
  auto r = proc.wait();
  if (r.outcome != subprocess_outcome::exited || r.exit_code != 0) {
    a.error_class = "router_failure";
    a.message = std::string{to_string(r.outcome)} + " (exit "
                + std::to_string(r.exit_code) + ")";
    return a;
  }
  auto answer = parse_cli_output(family, r.out);
  a.ok = answer.ok;
  a.text = answer.text;
  a.message = answer.error;
  return a;
}

cli_router_actor::behavior_type runner(cli_router_actor::pointer,
                                       std::shared_ptr<subprocess> proc,
                                       cli_family family) {
  return {
    [proc, family](caf::get_atom) {
      return wait_for_answer(*proc, family);
    },
  };
}

} // namespace

cli_router_run start_cli_router(caf::local_actor* parent,
                                const router_config& rc,
                                const std::string& text,
                                const std::vector<registry_entry>& entries) {
  subprocess_options opts;
  opts.argv = rc.command.empty() ? default_command(rc.family) : rc.command;
  opts.stdin_data = cli_router_prompt(text, entries);
  opts.timeout = std::chrono::seconds{rc.timeout_s};
  opts.max_output_bytes = rc.max_output_bytes;
  opts.kill_grace = std::chrono::seconds{1};
  auto proc = std::make_shared<subprocess>(std::move(opts));
  auto hdl = parent->system().spawn<caf::detached>(runner, proc, rc.family);
  return cli_router_run{std::move(hdl), std::move(proc)};
}

routing_plan plan_of_cli_run(const adapter_result* a, const std::string& text,
                             const std::vector<registry_entry>& entries) {
  auto plan = plan_from_cli_answer(a && a->ok ? a->text : std::string{}, text,
                                   entries);
  if (!a)
    plan.fallback_reason = "router_failure: no answer";
  else if (!a->ok && a->error_class == "router_failure")
    plan.fallback_reason = "router_failure: " + a->message;
  return plan;
}

} // namespace butlers
