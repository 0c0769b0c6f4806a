// The event hub: scopes, bounded buffers with counted drops while a
// subscriber's socket is busy, last-write-wins summaries, and no growth.

#include <functional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "runtime/event_hub.hpp"

namespace butlers {
namespace {

/// A fake socket: records writes and completes them only when told.
struct fake_socket {
  std::vector<std::string> written;
  std::vector<std::function<void(bool)>> pending;

  event_hub::write_fn writer() {
    return [this](std::string chunk, std::function<void(bool)> done) {
      written.push_back(std::move(chunk));
      pending.push_back(std::move(done));
    };
  }

  /// Completes the oldest write.
  void complete(bool ok = true) {
    auto done = std::move(pending.front());
    pending.erase(pending.begin());
    done(ok);
  }
};

TEST(EventHub, ThreadScopeSeesOnlyItsThread) {
  event_hub hub{8, 4};
  fake_socket a;
  fake_socket b;
  auto sa = hub.subscribe("t1", a.writer());
  auto sb = hub.subscribe("t2", b.writer());
  ASSERT_TRUE(sa && sb);
  EXPECT_TRUE(hub.wants_thread("t1"));
  EXPECT_FALSE(hub.wants_thread("t3"));
  hub.publish_thread("t1", "one");
  hub.publish_thread("t3", "nobody");
  ASSERT_EQ(a.written.size(), 1u);
  EXPECT_EQ(a.written[0], "one");
  EXPECT_TRUE(b.written.empty());
}

TEST(EventHub, ASlowSubscriberHasFramesDroppedAndCounted) {
  counter dropped;
  event_hub hub{8, 3, &dropped};
  fake_socket s;
  auto sub = hub.subscribe("t1", s.writer());
  // The first frame goes out at once; the socket never finishes it.
  for (int i = 0; i < 10; ++i)
    hub.publish_thread("t1", "f" + std::to_string(i) + ";");
  ASSERT_EQ(s.written.size(), 1u);
  EXPECT_EQ(s.written[0], "f0;");
  // Three wait (the buffer), six were dropped; memory stays bounded.
  EXPECT_EQ(sub->frames.size(), 3u);
  EXPECT_EQ(hub.dropped(), 6u);
  EXPECT_EQ(dropped.value(), 6u);
  // Once the socket is free, what waited goes out as one write.
  s.complete();
  ASSERT_EQ(s.written.size(), 2u);
  EXPECT_EQ(s.written[1], "f1;f2;f3;");
  s.complete();
  hub.publish_thread("t1", "next;");
  ASSERT_EQ(s.written.size(), 3u);
  EXPECT_EQ(s.written[2], "next;");
}

TEST(EventHub, SummariesCoalesceLastWriteWinsPerThread) {
  event_hub hub{8, 2};
  fake_socket s;
  auto sub = hub.subscribe("", s.writer());
  EXPECT_TRUE(hub.wants_summary());
  hub.publish_summary("t1", "t1-a;");
  ASSERT_EQ(s.written.size(), 1u);
  // While the socket is busy: t1 three times, t2 once, t3 dropped (the
  // buffer holds two threads).
  hub.publish_summary("t1", "t1-b;");
  hub.publish_summary("t2", "t2-a;");
  hub.publish_summary("t1", "t1-c;");
  hub.publish_summary("t3", "t3-a;");
  EXPECT_EQ(hub.dropped(), 1u);
  s.complete();
  ASSERT_EQ(s.written.size(), 2u);
  EXPECT_EQ(s.written[1], "t1-c;t2-a;");
}

TEST(EventHub, SubscribersAreBoundedAndAFailedWriteUnsubscribes) {
  event_hub hub{2, 4};
  fake_socket a;
  fake_socket b;
  fake_socket c;
  auto sa = hub.subscribe("t1", a.writer());
  auto sb = hub.subscribe("", b.writer());
  EXPECT_EQ(hub.subscribe("t1", c.writer()), nullptr);
  EXPECT_EQ(hub.size(), 2u);
  hub.publish_thread("t1", "x");
  a.complete(false); // the client went away
  EXPECT_EQ(hub.size(), 1u);
  EXPECT_FALSE(hub.wants_thread("t1"));
  EXPECT_NE(hub.subscribe("t1", c.writer()), nullptr);
}

TEST(EventHub, HeartbeatWritesOnlyToIdleSubscribers) {
  event_hub hub{4, 4};
  fake_socket idle;
  fake_socket busy;
  hub.subscribe("t1", idle.writer());
  hub.subscribe("t2", busy.writer());
  hub.publish_thread("t2", "data");
  hub.heartbeat();
  ASSERT_EQ(idle.written.size(), 1u);
  EXPECT_EQ(idle.written[0].front(), ':');
  EXPECT_EQ(busy.written.size(), 1u);
  hub.close_all();
  EXPECT_EQ(hub.size(), 0u);
  hub.publish_thread("t1", "after close");
  EXPECT_EQ(idle.written.size(), 1u);
}

} // namespace
} // namespace butlers
