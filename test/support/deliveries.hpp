#pragma once

// A reply on its way to the messenger, as the switchboard wraps it: the
// route.v1 text, and the envelope it was built from.

#include <string>

#include <gtest/gtest.h>

#include "runtime/route.hpp"
#include "runtime/uuid.hpp"

namespace butlers::test {

/// The delivery route of a reply on `channel` (text; `parsed`, when given,
/// gets the envelope).
inline std::string delivery_route(const std::string& channel,
                                  route_envelope* parsed = nullptr) {
  route_envelope env;
  env.request_id = make_uuid_v7().to_string();
  env.received_at = "2026-11-23T04:00:00Z";
  env.source_channel = channel;
  env.source_endpoint_identity = "tests";
  env.source_sender_identity = "user-1";
  auto notify = make_notify_json(env, "health", "your reply", "work-1");
  std::string out;
  EXPECT_FALSE(
    make_delivery_route(notify, make_uuid_v7().to_string(), 0, out, parsed));
  return out;
}

} // namespace butlers::test
