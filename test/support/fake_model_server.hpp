#pragma once

// A fake model API on 127.0.0.1 speaking the real wire protocols over
// HTTP/1.1: OpenAI chat completions (`POST /v1/chat/completions`) and
// Anthropic Messages (`POST /v1/messages`), answering with the SSE streams
// of test/fixtures/openai and test/fixtures/anthropic (chunked transfer
// encoding, as the real servers send them). It records every request (the
// body is what the model saw) and how its reply ended (complete, or the
// client closed the connection first), and can be told how to answer the
// next calls: slowly (a pause before each event, so a call lasts long
// enough to steer or cancel), with a status (429 with Retry-After, 500),
// or with a stream cut mid-answer (the connection closes before the
// stream's end).
//
// Tool calling: a reply whose fixture streams tool calls
// (`tool_calls_butler.sse`, `tool_use_butler.sse`, see
// `push_tool_round`) makes the model ask for tools; the next request
// should carry their results, which the fake reads out of it in the
// provider's shape (`fake_model_call::tool_results`), along with the
// tools the request declared.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "test/support/loopback_server.hpp"

namespace butlers::test {

/// How the fake answers one call.
struct fake_model_reply {
  enum kind_t {
    /// 200 and the fixture's events, then the end of the body.
    stream,
    /// `status` with `body` (JSON) and `headers`.
    status,
    /// 200 and the fixture's first `cut_after_events` events, then the
    /// connection closes without ending the chunked body.
    cut,
  };
  kind_t kind = stream;
  /// File under test/fixtures/<api>/; "" = chat_stream.sse (openai) or
  /// messages_stream.sse (anthropic).
  std::string fixture;
  /// stream, cut: pause before each event.
  std::chrono::milliseconds event_interval{0};
  /// cut: events sent before the cut.
  size_t cut_after_events = 3;
  /// status: the status line's code, the body and extra header lines
  /// ("Retry-After: 1\r\n").
  int code = 200;
  std::string body;
  std::string headers;
};

/// A tool result a request carried: OpenAI `{"role":"tool",
/// "tool_call_id", "content"}`, Anthropic `{"type":"tool_result",
/// "tool_use_id", "content", "is_error"}` in a user message.
struct fake_tool_result {
  std::string call_id;
  std::string content;
  bool is_error = false;
};

/// One request as the fake saw it, and how its reply ended.
struct fake_model_call {
  /// "openai" or "anthropic" (from the path); "" for any other path
  /// (answered 404).
  std::string api;
  std::string method;
  std::string path;
  /// Names lower-cased.
  std::map<std::string, std::string> headers;
  std::string body;
  /// The names of the tools the request declared (`tools[]`).
  std::vector<std::string> tools;
  /// The ids of the tool calls of the assistant turns in the request
  /// (OpenAI `tool_calls[].id`, Anthropic `tool_use` blocks), in order.
  std::vector<std::string> tool_call_ids;
  /// The tool results the request carried, in order.
  std::vector<fake_tool_result> tool_results;
  /// The files the request's user messages carried, in order, each as
  /// "<part> <media_type> sha256=<hash of the bytes> bytes=<n>": OpenAI
  /// `image_url` (a data URL) and `file` parts, Anthropic `image` and
  /// `document` blocks with a base64 source.
  std::vector<std::string> files;
  std::chrono::steady_clock::time_point received;
  /// The reply ended: written whole, cut, or the client went away.
  bool ended = false;
  std::chrono::steady_clock::time_point ended_at;
  /// The client closed the connection before the reply was complete.
  bool client_closed = false;
  /// Events written.
  size_t events_sent = 0;
};

/// Reads the tools, tool calls and tool results out of a request body of
/// `api` ("openai" or "anthropic") into `call`.
void read_tool_traffic(const std::string& api, fake_model_call& call);

/// Reads the files of a request body into `call.files`.
void read_files(fake_model_call& call);

/// The events of a fixture, each with its terminating blank line.
std::vector<std::string> model_fixture_events(const std::string& api,
                                              const std::string& file);

class fake_model_server {
 public:
  fake_model_server();
  ~fake_model_server();
  fake_model_server(const fake_model_server&) = delete;
  fake_model_server& operator=(const fake_model_server&) = delete;

  /// "http://127.0.0.1:PORT" (a runtime's base_url).
  std::string base_url() const;

  /// Answers the next call so (replies queue up, first in first out).
  void push(fake_model_reply r);

  /// Queues a reply that asks for tools: the API's fixture of tool calls
  /// (`tool_calls_butler.sse` for openai, `tool_use_butler.sse` for
  /// anthropic, or `fixture`). What follows answers with text (the
  /// default) unless more is queued.
  void push_tool_round(const std::string& api, std::string fixture = {});

  /// How calls are answered when nothing is queued (default: the
  /// fixture at once).
  void set_default(fake_model_reply r);

  /// Every request so far, in arrival order.
  std::vector<fake_model_call> calls() const;

  /// Requests so far.
  size_t call_count() const;

 private:
  struct state;
  void serve(loopback_connection& conn);

  std::shared_ptr<state> st_;
  std::unique_ptr<loopback_server> server_;
};

} // namespace butlers::test
