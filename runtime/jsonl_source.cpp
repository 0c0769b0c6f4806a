#include "runtime/jsonl_source.hpp"

#include <algorithm>
#include <fstream>

#include <spdlog/spdlog.h>

#include "runtime/dedupe.hpp"
#include "runtime/json.hpp"

namespace butlers {

namespace {

bool is_blank(const std::string& s) {
  return std::all_of(s.begin(), s.end(), [](char c) {
    return c == ' ' || c == '\t' || c == '\r';
  });
}

/// The dedupe hint of a line: where it is and what it says.
std::string hint_of(const jsonl_line& l) {
  return "L" + std::to_string(l.offset) + ":"
         + sha256_hex(l.text).substr(0, 32);
}

} // namespace

// -- position -----------------------------------------------------------------

std::string jsonl_position::to_json() const {
  return R"({"line":)" + std::to_string(line) + R"(,"offset":)"
         + std::to_string(offset) + "}";
}

std::optional<jsonl_position> jsonl_position::from_json(
  const std::string& text) {
  rapidjson::Document doc;
  if (json::parse(text, doc) || !doc.IsObject())
    return std::nullopt;
  auto line = doc.FindMember("line");
  auto offset = doc.FindMember("offset");
  if (line == doc.MemberEnd() || offset == doc.MemberEnd()
      || !line->value.IsUint64() || !offset->value.IsUint64())
    return std::nullopt;
  return jsonl_position{line->value.GetUint64(), offset->value.GetUint64()};
}

// -- reader -------------------------------------------------------------------

jsonl_reader::jsonl_reader(std::string path, size_t max_line_bytes)
  : path_(std::move(path)), max_line_bytes_(max_line_bytes) {
  // nop
}

std::vector<jsonl_line> jsonl_reader::read(const jsonl_position& from,
                                           size_t max_lines,
                                           bool& truncated) const {
  truncated = false;
  std::vector<jsonl_line> out;
  std::ifstream in{path_, std::ios::binary};
  if (!in)
    return out;
  in.seekg(0, std::ios::end);
  auto size = static_cast<uint64_t>(in.tellg());
  if (size < from.offset) {
    truncated = true;
    return out;
  }
  in.seekg(static_cast<std::streamoff>(from.offset));
  jsonl_line cur;
  cur.offset = from.offset;
  auto pos = from;
  char buf[65536];
  while (out.size() < max_lines && in) {
    in.read(buf, sizeof(buf));
    auto n = static_cast<size_t>(in.gcount());
    for (size_t i = 0; i < n && out.size() < max_lines; ++i) {
      ++pos.offset;
      if (buf[i] != '\n') {
        if (cur.text.size() < max_line_bytes_ + 1)
          cur.text += buf[i];
        continue;
      }
      if (!cur.text.empty() && cur.text.back() == '\r')
        cur.text.pop_back();
      cur.too_long = cur.text.size() > max_line_bytes_;
      if (cur.too_long)
        cur.text.clear();
      cur.number = ++pos.line;
      cur.next = pos;
      out.push_back(std::move(cur));
      cur = jsonl_line{};
      cur.offset = pos.offset;
    }
  }
  return out;
}

// -- source -------------------------------------------------------------------

jsonl_source::jsonl_source(options opts)
  : opts_(std::move(opts)), reader_(opts_.path, opts_.max_line_bytes) {
  // nop
}

bool jsonl_source::load(connector_sink& sink, jsonl_position& pos) {
  auto backoff = opts_.backoff;
  for (;;) {
    auto r = sink.load_checkpoint(opts_.path);
    if (r.ok) {
      if (!r.value) {
        pos = {};
      } else if (auto p = jsonl_position::from_json(*r.value)) {
        pos = *p;
      } else {
        spdlog::warn("connector {}: unreadable checkpoint of {}, reading it "
                     "from the start",
                     opts_.name, opts_.path);
        pos = {};
      }
      return true;
    }
    spdlog::warn("connector {}: cannot read the checkpoint of {} (database "
                 "unavailable), again in {} ms",
                 opts_.name, opts_.path, backoff.count());
    if (!sink.stop().sleep_for(backoff))
      return false;
    backoff = std::min(backoff * 2, opts_.max_backoff);
  }
}

bool jsonl_source::submit(connector_sink& sink, std::vector<jsonl_line>& lines,
                          jsonl_position& pos) {
  auto backoff = opts_.backoff;
  size_t done = 0;
  while (done < lines.size()) {
    // Lines that are settled without the switchboard: blank ones, and
    // those too long to be an envelope.
    std::vector<submission> batch;
    std::vector<size_t> which;
    for (auto i = done; i < lines.size(); ++i) {
      auto& l = lines[i];
      if (l.too_long || is_blank(l.text))
        continue;
      batch.push_back(submission{l.text, hint_of(l)});
      which.push_back(i);
    }
    auto outcomes = batch.empty() ? std::vector<submit_outcome>{}
                                  : sink.submit_all(std::move(batch));
    // Advance over the settled prefix; stop at the first line to retry.
    size_t k = 0;
    auto start = pos;
    for (; done < lines.size(); ++done) {
      auto& l = lines[done];
      if (l.too_long) {
        sink.count(source_event::invalid);
        spdlog::warn("connector {}: {} line {} is longer than {} bytes, "
                     "skipped",
                     opts_.name, opts_.path, l.number, opts_.max_line_bytes);
      } else if (!is_blank(l.text)) {
        auto& o = outcomes.at(k++);
        if (!o.settled())
          break;
        if (o.status == submit_status::invalid)
          spdlog::warn("connector {}: {} line {} is not a valid envelope, "
                       "skipped: {}",
                       opts_.name, opts_.path, l.number, o.message);
      }
      pos = l.next;
    }
    if (!(pos == start) && !sink.store_checkpoint(opts_.path, pos.to_json()))
      spdlog::warn("connector {}: could not store the checkpoint of {} at "
                   "line {}; lines after the stored one are submitted again "
                   "after a restart (and deduplicated)",
                   opts_.name, opts_.path, pos.line);
    if (done == lines.size())
      return true;
    auto& o = outcomes.at(k - 1);
    auto wait = o.status == submit_status::refused ? opts_.backoff : backoff;
    spdlog::info("connector {}: {} line {} not stored ({}: {}), again in {} "
                 "ms",
                 opts_.name, opts_.path, lines[done].number,
                 to_string(o.status), o.message, wait.count());
    if (!sink.stop().sleep_for(wait))
      return false;
    if (o.status != submit_status::refused)
      backoff = std::min(backoff * 2, opts_.max_backoff);
  }
  return true;
}

void jsonl_source::run(connector_sink& sink) {
  jsonl_position pos;
  if (!load(sink, pos))
    return;
  spdlog::info("connector {}: reading {} from line {} (offset {})", opts_.name,
               opts_.path, pos.line + 1, pos.offset);
  bool missing_logged = false;
  while (!sink.stop().raised()) {
    bool truncated = false;
    auto lines = reader_.read(pos, std::max<size_t>(1, opts_.batch), truncated);
    if (truncated) {
      spdlog::warn("connector {}: {} is shorter than its checkpoint (offset "
                   "{}): replaced or truncated, reading it from the start",
                   opts_.name, opts_.path, pos.offset);
      pos = {};
      continue;
    }
    if (lines.empty()) {
      std::ifstream probe{opts_.path};
      if (!probe && !missing_logged)
        spdlog::warn("connector {}: cannot open {}; waiting for it", opts_.name,
                     opts_.path);
      missing_logged = !probe;
      if (!sink.stop().sleep_for(opts_.poll))
        return;
      continue;
    }
    if (!submit(sink, lines, pos))
      return;
  }
}

} // namespace butlers
