// A session's attachments (runtime/attachments.md): before its runtime
// starts, the bytes the request names are read through the node's reader
// (the table `attachments`, base64 as text) into the session's state; the
// runtimes that take files (CLIs, codex) get them written to a directory
// of the session's own, removed when the session ends, however it ends.
// The files are written on a thread of their own, never on the scheduler.

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>

#include <caf/event_based_actor.hpp>
#include <spdlog/spdlog.h>

#include "actors/session.hpp"

namespace butlers {

namespace {

/// The reads still out and what came back, in the request's order.
struct attachment_reads {
  std::vector<attachment_ref> refs;
  std::vector<std::optional<attachment_data>> got;
  size_t pending = 0;
  bool failed = false;
};

/// Claude takes content blocks; the other CLIs (codex, opencode, one-shot
/// commands) take files.
bool takes_files(const session_params& p) {
  return p.kind == session_runtime::cli
         && p.runtime.family != cli_family::claude;
}

/// Writes `xs` into a new directory; its path then the files' paths, one a
/// line ("" when it failed; then nothing is left behind).
std::string write_files(const std::vector<attachment_data>& xs) {
  char dir[] = "/tmp/butlers-attachments-XXXXXX";
  if (::mkdtemp(dir) == nullptr)
    return {};
  std::string out = dir;
  for (size_t i = 0; i < xs.size(); ++i) {
    auto bytes = base64_decode(xs[i].base64);
    auto path = out + "/" + attachment_file_name(i, xs[i].ref);
    std::ofstream f{path, std::ios::binary};
    if (bytes)
      f.write(bytes->data(), static_cast<std::streamsize>(bytes->size()));
    if (!bytes || !f) {
      std::error_code ec;
      std::filesystem::remove_all(dir, ec);
      return {};
    }
    out += "\n" + path;
  }
  return out;
}

void all_read(session_ptr self, std::shared_ptr<attachment_reads> reads,
              std::function<void()> then, session_fail_fn failed) {
  auto& st = self->state;
  for (size_t i = 0; i < reads->got.size(); ++i) {
    if (reads->got[i]) {
      st.attachments.push_back(std::move(*reads->got[i]));
    } else {
      spdlog::warn("session {}: attachment {} is no longer stored "
                   "(retention); the session runs without it",
                   st.item.work_id, reads->refs[i].sha256);
    }
  }
  if (st.attachments.empty() || !takes_files(st.params)) {
    then();
    return;
  }
  auto writer = self->spawn<caf::detached>(
    [](caf::event_based_actor*,
       std::shared_ptr<const std::vector<attachment_data>> xs)
      -> caf::behavior {
      return {
        [xs](caf::get_atom) {
          return write_files(*xs);
        },
      };
    },
    std::make_shared<const std::vector<attachment_data>>(st.attachments));
  self->request(writer, std::chrono::seconds{60}, caf::get_atom_v)
    .then(
      [self, then, failed, writer](std::string& written) {
        caf::anon_send_exit(writer, caf::exit_reason::user_shutdown);
        if (written.empty()) {
          failed("internal_error", "attachments not written to files", true);
          return;
        }
        auto& st = self->state;
        auto nl = written.find('\n');
        std::string dir = written.substr(0, nl);
        self->attach_functor([dir] {
          std::error_code ec;
          std::filesystem::remove_all(dir, ec);
        });
        while (nl != std::string::npos) {
          auto next = written.find('\n', nl + 1);
          st.attachment_paths.push_back(
            written.substr(nl + 1,
                           next == std::string::npos ? next : next - nl - 1));
          nl = next;
        }
        then();
      },
      [failed, writer](const caf::error& err) {
        caf::anon_send_exit(writer, caf::exit_reason::user_shutdown);
        failed("internal_error",
               "attachments not written to files: " + to_string(err), true);
      });
}

} // namespace

void load_session_attachments(session_ptr self, std::function<void()> then,
                              session_fail_fn failed) {
  auto& st = self->state;
  auto refs = parse_attachments(st.env.attachments);
  // The messenger and the scripted runtime take no files.
  if (refs.empty() || st.params.kind == session_runtime::delivery
      || st.params.kind == session_runtime::scripted) {
    then();
    return;
  }
  if (!st.params.reader) {
    failed("target_unavailable", "attachments not read: no database reader",
           true);
    return;
  }
  auto reads = std::make_shared<attachment_reads>();
  reads->got.resize(refs.size());
  reads->pending = refs.size();
  reads->refs = refs;
  for (size_t i = 0; i < refs.size(); ++i) {
    named_statement read{"attachment_read", {refs[i].sha256}};
    auto done = [self, reads, then, failed](size_t i, const named_result* r) {
      if (reads->failed || self->state.finished)
        return;
      if (r == nullptr || !r->ok) {
        reads->failed = true;
        failed("target_unavailable", "attachments not read", true);
        return;
      }
      if (!r->rows.empty() && r->rows[0].size() == 3) {
        attachment_data d;
        d.ref = reads->refs[i];
        d.ref.media_type = r->rows[0][0];
        d.base64 = r->rows[0][2];
        reads->got[i] = std::move(d);
      }
      if (--reads->pending == 0)
        all_read(self, reads, then, failed);
    };
    self
      ->request(st.params.reader, std::chrono::seconds{30}, read_atom_v,
                std::move(read))
      .then(
        [done, i](const named_result& r) {
          done(i, &r);
        },
        [done, i](const caf::error&) {
          done(i, nullptr);
        });
  }
}

} // namespace butlers
