#pragma once

// For fake inbox writers in unit tests: answers a `write_request` write by
// write, through the fake's own handling of single writes, as the real
// writer does (each write placed as if it came alone, one reply for all).

#include <caf/expected.hpp>

#include "runtime/error.hpp"
#include "runtime/messages.hpp"

namespace butlers::test {

/// `named`, `work` and `complete` take one write each and return
/// `caf::expected` of its result.
template<class Named, class Work, class Complete>
write_reply answer_each(write_request& req, Named named, Work work,
                        Complete complete) {
  write_reply r;
  auto total = req.named.size() + req.work.size() + req.completions.size();
  r.errors.assign(total, 0);
  r.error_messages.resize(total);
  size_t e = 0;
  auto put = [&](auto& out, auto result) {
    if (result) {
      out.push_back(std::move(*result));
    } else {
      out.emplace_back();
      r.errors[e] = static_cast<uint8_t>(code_of(result.error()));
      r.error_messages[e] = message_of(result.error());
    }
    ++e;
  };
  for (auto& x : req.named)
    put(r.named, named(x));
  for (auto& x : req.work)
    put(r.work, work(x));
  for (auto& x : req.completions)
    put(r.completions, complete(x));
  return r;
}

} // namespace butlers::test
