#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "runtime/metrics.hpp"

namespace butlers {
namespace {

TEST(Metrics, CountersAndGaugesRender) {
  metrics_registry reg;
  auto& hot = reg.get_counter("butlers_buffer_enqueue_total", "enqueued",
                              "path=\"hot\"");
  auto& cold = reg.get_counter("butlers_buffer_enqueue_total", "enqueued",
                               "path=\"cold\"");
  EXPECT_EQ(&hot, &reg.get_counter("butlers_buffer_enqueue_total", "enqueued",
                                   "path=\"hot\""));
  hot.inc(3);
  cold.inc();
  reg.get_gauge("butlers_buffer_queue_depth", "depth").set(7);
  auto text = reg.render();
  EXPECT_NE(text.find("# TYPE butlers_buffer_enqueue_total counter\n"),
            std::string::npos);
  EXPECT_NE(text.find("butlers_buffer_enqueue_total{path=\"hot\"} 3\n"),
            std::string::npos)
    << text;
  EXPECT_NE(text.find("butlers_buffer_enqueue_total{path=\"cold\"} 1\n"),
            std::string::npos);
  EXPECT_NE(text.find("butlers_buffer_queue_depth 7\n"), std::string::npos);
  // One HELP/TYPE header per family.
  EXPECT_EQ(text.find("# TYPE butlers_buffer_enqueue_total"),
            text.rfind("# TYPE butlers_buffer_enqueue_total"));
}

TEST(Metrics, HistogramBucketsAreCumulative) {
  metrics_registry reg;
  auto& h = reg.get_histogram("lat_ms", "latency", {1, 10, 100});
  for (double x : {0.5, 1.0, 5.0, 50.0, 500.0})
    h.observe(x);
  auto text = reg.render();
  EXPECT_NE(text.find("lat_ms_bucket{le=\"1\"} 2\n"), std::string::npos)
    << text;
  EXPECT_NE(text.find("lat_ms_bucket{le=\"10\"} 3\n"), std::string::npos);
  EXPECT_NE(text.find("lat_ms_bucket{le=\"100\"} 4\n"), std::string::npos);
  EXPECT_NE(text.find("lat_ms_bucket{le=\"+Inf\"} 5\n"), std::string::npos);
  EXPECT_NE(text.find("lat_ms_count 5\n"), std::string::npos);
  EXPECT_NE(text.find("lat_ms_sum 556.5\n"), std::string::npos);
}

TEST(Metrics, TypeClashIsAnError) {
  metrics_registry reg;
  reg.get_counter("x", "a counter");
  EXPECT_THROW(reg.get_gauge("x", "now a gauge"), std::logic_error);
}

TEST(Metrics, ConcurrentUpdatesAreNotLost) {
  metrics_registry reg;
  auto& c = reg.get_counter("c", "c");
  auto& h = reg.get_histogram("h", "h");
  std::vector<std::thread> ts;
  for (int t = 0; t < 4; ++t)
    ts.emplace_back([&] {
      for (int i = 0; i < 10000; ++i) {
        c.inc();
        h.observe(1.0);
      }
    });
  for (auto& t : ts)
    t.join();
  EXPECT_EQ(c.value(), 40000u);
  EXPECT_EQ(h.count(), 40000u);
}

} // namespace
} // namespace butlers
