// The HTTP model runtimes (`kind = "openai"`, `kind = "anthropic"`): a run
// is a loop of streamed model calls on a thread of its own (a detached
// actor), through the shared libcurl client. The conversation is the
// system prompt, the first user message (the butler's role, the request
// context and the user's text fenced as data, as the CLI runtimes get
// it), and after each call the assistant's answer; steer input that
// arrived during a call is appended as user messages at the boundary
// before the next call, and a run that received input during its last
// call makes one more call (bounded by `max_model_calls`). Each call is
// retried after a 429, a 5xx, a transport failure or a stream cut before
// its end (the whole call again, after a backoff that honours
// `retry-after`); other 4xx fail the run at once.
//
// Tools: a session with a capability token declares the node's tool
// catalogue in every call (native tool calling, runtime/model_api.hpp).
// A response with tool calls is followed by the calls, one after the
// other, through the tool server (a blocking request from the run's own
// thread, with the session's token), then the assistant turn and the
// results join the conversation and the model is called again. A result
// reaches the model as text: the structured JSON of an ok result, the
// text of an error (flagged is_error). The calls count against
// `max_model_calls`: a response that still asks for tools when the run
// made its last allowed call ends the run with an error naming the limit
// (its calls are not made: their effects would be unknown to the model,
// and a text answer so far is at best half an answer).

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <caf/blocking_actor.hpp>
#include <caf/send.hpp>
#include <caf/spawn_options.hpp>
#include <spdlog/spdlog.h>

#include "actors/session_adapters.hpp"
#include "runtime/butler_trace.hpp"
#include "runtime/config.hpp"
#include "runtime/http_client.hpp"
#include "runtime/interruptible_sleep.hpp"
#include "runtime/json.hpp"
#include "runtime/model_api.hpp"
#include "runtime/steer_box.hpp"

namespace butlers {

namespace {

using std::chrono::milliseconds;

/// The first bytes of a response body kept for an error message.
constexpr size_t max_error_body = 4096;

/// Largest system prompt file read when the configuration did not read it.
constexpr size_t max_prompt_file = size_t{1} << 20;

/// Everything the call loop needs, moved to its thread.
struct http_model_run {
  runtime_config rt;
  /// Where `rt.max_model_calls` came from, for the message of a run that
  /// reaches it.
  std::string calls_limit = "runtime.max_model_calls";
  model_call_settings settings;
  /// The conversation so far.
  std::vector<chat_message> messages;
  std::shared_ptr<steer_box> box;
  std::shared_ptr<std::atomic<bool>> stop;
  session_actor me;
  std::string work_id;
  std::string butler;
  /// The node's tracer when the run is traced and sampled (else null), and
  /// where its calls' `chat {model}` spans go.
  tracer_ptr traces;
  model_call_parent trace;
  /// The session's capability token and the tool server ("" / null: the
  /// run has no tools).
  std::string token;
  tool_server_actor tool_server;
  /// The run's thread, which makes the blocking tool requests.
  caf::blocking_actor* self = nullptr;
};

/// How one HTTP request ended.
struct call_outcome {
  enum kind_t {
    /// The stream reached its end: `text` is the answer.
    ok,
    /// A failure a retry may cure.
    retry,
    /// A failure no retry cures.
    fail,
    /// stop() was called.
    stopped,
  };
  kind_t kind = fail;
  std::string text;
  /// ok: the tools the model called (empty for a final answer).
  std::vector<model_tool_call> tool_calls;
  std::string error_class;
  std::string message;
  /// The server asked for this wait (retry-after, retry-after-ms).
  std::optional<milliseconds> retry_after;
};

const char* api_name(model_api api) {
  return api == model_api::openai ? "openai" : "anthropic";
}

/// A steer input as the model sees it: the user's text fenced as data, as
/// in the first message.
std::string steer_message(const steer_input& in) {
  return "Further message from the user, sent while you were answering "
         "(data, JSON string): "
         + json::quote(in.text) + "\n";
}

/// `retry-after-ms` (OpenAI) or `retry-after` in seconds.
std::optional<milliseconds> retry_after_of(const http_response& res) {
  if (auto* ms = res.header("retry-after-ms")) {
    char* end = nullptr;
    auto v = std::strtoull(ms->c_str(), &end, 10);
    if (end != ms->c_str() && *end == '\0')
      return milliseconds{
        static_cast<int64_t>(std::min<uint64_t>(v, 1u << 30))};
  }
  if (auto s = res.retry_after())
    return std::chrono::duration_cast<milliseconds>(*s);
  return std::nullopt;
}

/// What a complete response with status `status` (not 200) means.
call_outcome status_outcome(model_api api, int status, const std::string& body,
                            const http_response& res) {
  call_outcome out;
  out.message = std::string{api_name(api)} + " API answered "
                + std::to_string(status) + ": " + model_error_text(body);
  out.retry_after = retry_after_of(res);
  if (status == 429) {
    out.kind = call_outcome::retry;
    out.error_class = "overload_rejected";
  } else if (status >= 500 || status == 408) {
    out.kind = call_outcome::retry;
    out.error_class = "target_unavailable";
  } else if (status == 401 || status == 403 || status == 404) {
    out.error_class = "target_unavailable";
  } else {
    out.error_class = "validation_error";
  }
  return out;
}

/// What a transfer that failed (`res.failure`) means.
call_outcome transport_outcome(model_api api, const http_response& res,
                               const model_stream& stream) {
  call_outcome out;
  auto what = std::string{api_name(api)} + " API: ";
  switch (res.failure) {
    case http_failure::timeout:
      out.kind = call_outcome::retry;
      out.error_class = "timeout";
      out.message = what + "the call did not finish within timeout_s";
      return out;
    case http_failure::connect:
    case http_failure::protocol:
      out.kind = call_outcome::retry;
      out.error_class = "target_unavailable";
      out.message = what
                    + (res.status == 200
                         ? "the stream was cut after "
                             + std::to_string(stream.state().text.size())
                             + " bytes of answer (" + res.error + ")"
                         : res.error);
      return out;
    case http_failure::cancelled:
      out.error_class = "internal_error";
      out.message = what + "the answer exceeded 4 MiB";
      return out;
    default: break;
  }
  out.error_class = "target_unavailable";
  out.message = what + to_string(res.failure) + ": " + res.error;
  return out;
}

/// One HTTP request over the conversation so far; deltas go to the session
/// as they arrive, tokens are added to `usage`.
call_outcome call_once(http_model_run& r, session_usage& usage) {
  auto req = build_model_request(r.settings, r.messages);
  http_request h;
  h.method = "POST";
  h.url = std::move(req.url);
  h.headers = std::move(req.headers);
  h.body = std::move(req.body);
  h.timeout = std::chrono::seconds{r.rt.timeout_s};
  h.connect_timeout = std::min<milliseconds>(h.timeout, milliseconds{10000});
  model_stream stream{r.settings.api};
  std::string head;
  auto me = r.me;
  h.on_data = [&](std::string_view chunk) {
    if (head.size() < max_error_body)
      head.append(chunk.substr(0, max_error_body - head.size()));
    return stream.feed(chunk, [&me](std::string_view d) {
      caf::anon_send(me, delta_atom_v, std::string{d});
    });
  };
  auto res = shared_http_client().perform(h, r.stop.get());
  ++usage.calls;
  auto& st = stream.state();
  if (st.usage_seen) {
    usage.input_tokens += st.input_tokens;
    usage.output_tokens += st.output_tokens;
    usage.cache_read_tokens += st.cache_read_tokens;
    usage.cache_write_tokens += st.cache_write_tokens;
  }
  if (!st.model.empty())
    usage.model = st.model;
  call_outcome out;
  if (r.stop->load()) {
    out.kind = call_outcome::stopped;
    return out;
  }
  if (res.failure != http_failure::none)
    return transport_outcome(r.settings.api, res, stream);
  if (res.status != 200)
    return status_outcome(r.settings.api, res.status, head, res);
  auto what = std::string{api_name(r.settings.api)} + " API: ";
  if (st.error) {
    out.kind = call_outcome::retry;
    out.error_class = st.error_type == "overloaded_error"
                        ? "overload_rejected"
                        : "target_unavailable";
    out.message = what + "error in the stream: "
                  + (st.error_type.empty() ? "" : st.error_type + ": ")
                  + st.error_message;
    return out;
  }
  if (!stream.complete()) {
    out.kind = call_outcome::retry;
    out.error_class = "target_unavailable";
    out.message = what + "the stream ended before its end after "
                  + std::to_string(st.text.size()) + " bytes of answer";
    return out;
  }
  out.kind = call_outcome::ok;
  out.text = st.text;
  out.tool_calls = st.tool_calls;
  return out;
}

/// Records the `chat {model}` span of one HTTP request: `before` and
/// `after` are the run's usage around it.
void trace_call(const http_model_run& r, const session_usage& before,
                const session_usage& after, uint64_t start_ns,
                const call_outcome& out) {
  model_call_record c;
  c.provider = api_name(r.settings.api);
  c.request_model = r.settings.model;
  c.response_model = after.model;
  c.start_ns = start_ns;
  c.end_ns = unix_nanos_now();
  c.usage_seen = after.input_tokens != before.input_tokens
                 || after.output_tokens != before.output_tokens;
  c.input_tokens = after.input_tokens - before.input_tokens;
  c.output_tokens = after.output_tokens - before.output_tokens;
  if (out.kind != call_outcome::ok) {
    c.error_class = out.kind == call_outcome::stopped ? "cancelled"
                                                      : out.error_class;
    c.error_message = out.message;
  }
  r.traces->record(model_call_span(r.trace, c));
}

/// One model call (traced when the run is) and its model-call span.
call_outcome call_traced(http_model_run& r, session_usage& usage) {
  if (!r.traces)
    return call_once(r, usage);
  auto before = usage;
  auto start_ns = unix_nanos_now();
  auto out = call_once(r, usage);
  trace_call(r, before, usage, start_ns, out);
  return out;
}

/// One model call with its retries.
call_outcome call_with_retries(http_model_run& r, session_usage& usage) {
  for (uint32_t attempt = 0;; ++attempt) {
    auto out = call_traced(r, usage);
    if (out.kind != call_outcome::retry)
      return out;
    if (attempt >= r.rt.retries) {
      out.kind = call_outcome::fail;
      out.message += " (gave up after " + std::to_string(attempt + 1)
                     + " attempts)";
      return out;
    }
    auto shift = std::min<uint32_t>(attempt, 20);
    auto wait = milliseconds{
      std::min<uint64_t>(uint64_t{r.rt.retry_base_ms} << shift,
                         r.rt.retry_max_ms)};
    if (out.retry_after)
      wait = std::min<milliseconds>(std::max(wait, *out.retry_after),
                                    milliseconds{r.rt.retry_max_ms});
    spdlog::info("{} call of {} for work {}: {}; retry {} of {} in {} ms",
                 api_name(r.settings.api), r.butler, r.work_id, out.message,
                 attempt + 1, r.rt.retries, wait.count());
    if (!sleep_unless_stopped(wait, r.stop.get())) {
      out.kind = call_outcome::stopped;
      return out;
    }
  }
}

adapter_result failure(std::string cls, std::string message, bool retryable,
                       const session_usage& usage) {
  adapter_result a;
  a.error_class = std::move(cls);
  a.message = std::move(message);
  a.retryable = retryable;
  a.usage = usage;
  return a;
}

/// Reads the key and the system prompt (both may block or fail); "" when
/// all is well, else what is wrong.
std::string prepare(http_model_run& r) {
  auto& rt = r.rt;
  if (!rt.api_key_env.empty()) {
    auto* key = std::getenv(rt.api_key_env.c_str());
    if (key == nullptr || *key == '\0')
      return "environment variable " + rt.api_key_env
             + " (runtime.api_key_env) is not set";
    r.settings.api_key = key;
  }
  if (!rt.system_prompt_file.empty() && rt.system_prompt_text.empty()) {
    auto file = read_small_file(rt.system_prompt_file, max_prompt_file);
    if (!file.error.empty())
      return "cannot read runtime.system_prompt_file '" + rt.system_prompt_file
             + "': " + file.error;
    rt.system_prompt_text = std::move(file.data);
  }
  r.settings.system_prompt = rt.system_prompt_file.empty()
                               ? rt.system_prompt
                               : rt.system_prompt_text;
  return {};
}

/// Runs one tool call of the model through the tool server (blocking: the
/// run's own thread) and says how it went, as the model is told. The
/// request waits at most `timeout_s`; a cancel takes effect after the call
/// under way (tool calls are short: one statement or one delivery).
model_tool_result run_tool(http_model_run& r, const model_tool_call& c) {
  tool_call call;
  call.token = r.token;
  call.name = c.name;
  call.arguments = c.arguments.empty() ? std::string{"{}"} : c.arguments;
  tool_result res;
  r.self
    ->request(r.tool_server, std::chrono::seconds{r.rt.timeout_s}, tool_atom_v,
              std::move(call))
    .receive(
      [&res](tool_result& x) {
        res = std::move(x);
      },
      [&](caf::error& err) {
        res = tool_failed("unavailable", "the tool server did not answer: "
                                           + r.self->system().render(err));
      });
  model_tool_result out;
  out.call_id = c.id;
  if (res.status == tool_status::ok) {
    out.content = res.structured.empty() ? res.text : res.structured;
  } else {
    out.is_error = true;
    out.content = res.text.empty() ? res.structured : res.text;
  }
  return out;
}

/// The call loop (on the run's own thread).
adapter_result run_calls(http_model_run& r) {
  session_usage usage;
  usage.model = r.settings.model;
  if (auto problem = prepare(r); !problem.empty())
    return failure("internal_error", std::move(problem), false, usage);
  std::string answer;
  for (uint32_t call = 1;; ++call) {
    // The boundary before the call: every steer input waiting becomes a
    // user message the call sees.
    steer_applied applied;
    applied.work_id = r.work_id;
    applied.turn = call;
    applied.applied_us = unix_now_us();
    applied.inputs = r.box->take();
    for (auto& in : applied.inputs)
      r.messages.push_back({"user", steer_message(in)});
    caf::anon_send(r.me, steer_atom_v, std::move(applied));
    auto out = call_with_retries(r, usage);
    caf::anon_send(r.me, usage_atom_v, usage);
    if (out.kind == call_outcome::stopped)
      return failure("internal_error", "cancelled", false, usage);
    if (out.kind != call_outcome::ok)
      return failure(std::move(out.error_class), std::move(out.message),
                     out.kind == call_outcome::retry, usage);
    answer = std::move(out.text);
    if (!out.tool_calls.empty() && !r.token.empty()) {
      if (call >= r.rt.max_model_calls)
        return failure("internal_error",
                       "the model asked for "
                         + std::to_string(out.tool_calls.size())
                         + " tool call(s) after its last allowed call "
                           "("
                         + r.calls_limit + " = "
                         + std::to_string(r.rt.max_model_calls) + ")",
                       false, usage);
      chat_message turn{"assistant", answer};
      turn.tool_calls = std::move(out.tool_calls);
      chat_message results{"tool", ""};
      for (auto& c : turn.tool_calls) {
        if (r.stop->load())
          return failure("internal_error", "cancelled", false, usage);
        results.tool_results.push_back(run_tool(r, c));
      }
      r.messages.push_back(std::move(turn));
      r.messages.push_back(std::move(results));
      continue;
    }
    // The Messages API refuses empty assistant turns; the next user
    // message follows the last one instead.
    if (!answer.empty())
      r.messages.push_back({"assistant", answer});
    if (!r.box->pending() || call >= r.rt.max_model_calls)
      break;
  }
  adapter_result a;
  a.ok = true;
  a.text = std::move(answer);
  a.usage = usage;
  return a;
}

class http_model_adapter final : public session_adapter {
 public:
  void start(session_ptr self) override {
    auto& st = self->state;
    auto run = std::make_shared<http_model_run>();
    run->rt = st.params.runtime;
    if (st.env.run_max_steps > 0)
      run->calls_limit = "options.max_steps of the turn";
    auto& s = run->settings;
    s.api = run->rt.kind == runtime_kind::anthropic ? model_api::anthropic
                                                    : model_api::openai;
    s.base_url = run->rt.base_url;
    s.model = run->rt.model;
    s.max_tokens = run->rt.max_tokens;
    s.temperature = run->rt.temperature;
    run->messages.push_back({"user", cli_prompt(st.params.butler, st.env)});
    if (!st.attachments.empty())
      run->messages.back().attachments = std::make_shared<
        const std::vector<attachment_data>>(st.attachments);
    run->box = box_;
    run->stop = stop_;
    run->me = session_actor{self};
    run->work_id = st.item.work_id;
    run->butler = st.params.butler;
    if (!st.token.empty() && st.params.tool_server) {
      run->token = st.token;
      run->tool_server = st.params.tool_server;
      for (auto& t : tool_catalogue())
        s.tools.push_back({t.name, t.description, t.input_schema});
    }
    if (auto& tr = st.params.traces; tr && tr->enabled()) {
      run->trace = model_call_parent_of(st.item.work_id, st.item.lease_token,
                                        st.env.trace_parent,
                                        tr->sample_ratio());
      if (run->trace.trace.sampled())
        run->traces = tr;
    }
    // Input that arrived before the session started is seen by the first
    // call.
    on_steer(self);
    auto stop = stop_;
    auto box = box_;
    self->attach_functor([stop, box] {
      *stop = true;
      box->close();
    });
    // The loop blocks: a thread of its own, never the scheduler. The run
    // travels as a spawn argument (CAF 0.17.6 needs one).
    self->spawn<caf::detached>(
      [](caf::blocking_actor* thread, std::shared_ptr<http_model_run> run) {
        run->self = thread;
        auto result = run_calls(*run);
        caf::anon_send(run->me, done_atom_v, std::move(result));
      },
      std::move(run));
  }

  void stop() override {
    *stop_ = true;
    box_->close();
  }

  void on_steer(session_ptr self) override {
    auto& inbox = self->state.steer_inbox;
    for (auto& in : inbox)
      box_->push(std::move(in));
    inbox.clear();
  }

 private:
  /// Set to abort the stream under way and end the retries.
  std::shared_ptr<std::atomic<bool>>
    stop_ = std::make_shared<std::atomic<bool>>(false);
  std::shared_ptr<steer_box> box_ = std::make_shared<steer_box>();
};

} // namespace

std::unique_ptr<session_adapter> make_http_model_adapter() {
  return std::make_unique<http_model_adapter>();
}

} // namespace butlers
