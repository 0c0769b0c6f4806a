#include <stdlib.h>
#include <sys/stat.h>

#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "runtime/json.hpp"
#include "runtime/outbox.hpp"
#include "test/support/temp_dir.hpp"

using butlers::append_outbox_line;

namespace {

namespace fs = std::filesystem;

using butlers::test::temp_dir;

std::vector<std::string> read_lines(const std::string& path, bool& ends_nl) {
  std::ifstream in{path, std::ios::binary};
  std::string all{std::istreambuf_iterator<char>{in}, {}};
  ends_nl = !all.empty() && all.back() == '\n';
  std::vector<std::string> lines;
  size_t start = 0;
  for (size_t nl; (nl = all.find('\n', start)) != std::string::npos;
       start = nl + 1)
    lines.push_back(all.substr(start, nl - start));
  if (start < all.size())
    lines.push_back(all.substr(start));
  return lines;
}

} // namespace

TEST(outbox, creates_the_file_and_appends_lines) {
  temp_dir dir;
  auto path = dir.file("outbox.jsonl");
  EXPECT_EQ(append_outbox_line(path, R"({"n":1})"), "");
  EXPECT_EQ(append_outbox_line(path, R"({"n":2})"), "");
  bool ends_nl = false;
  auto lines = read_lines(path, ends_nl);
  EXPECT_TRUE(ends_nl);
  EXPECT_EQ(lines, (std::vector<std::string>{R"({"n":1})", R"({"n":2})"}));
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  mode_t mask = ::umask(0);
  ::umask(mask);
  EXPECT_EQ(st.st_mode & 0777, 0640 & ~mask);
}

TEST(outbox, concurrent_appends_stay_whole_lines) {
  temp_dir dir;
  auto path = dir.file("outbox.jsonl");
  constexpr int threads = 8;
  constexpr int per_thread = 50;
  std::vector<std::thread> workers;
  std::vector<std::string> errors(threads);
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      for (int i = 0; i < per_thread; ++i) {
        // Up to ~9 KiB: larger than PIPE_BUF, so only O_APPEND + one
        // write() keeps lines whole.
        std::string pad(static_cast<size_t>((t * 997 + i * 131) % 9000),
                        static_cast<char>('a' + t));
        auto line = "{\"thread\":" + std::to_string(t) + ",\"seq\":"
                    + std::to_string(i) + ",\"pad\":\"" + pad + "\"}";
        auto err = append_outbox_line(path, line);
        if (!err.empty() && errors[t].empty())
          errors[t] = err;
      }
    });
  }
  for (auto& w : workers)
    w.join();
  for (auto& e : errors)
    EXPECT_EQ(e, "");
  bool ends_nl = false;
  auto lines = read_lines(path, ends_nl);
  EXPECT_TRUE(ends_nl);
  ASSERT_EQ(lines.size(), size_t{threads * per_thread});
  std::set<std::pair<int, int>> seen;
  for (auto& line : lines) {
    rapidjson::Document doc;
    auto err = butlers::json::parse(line, doc);
    ASSERT_FALSE(err) << err->message << " in " << line.substr(0, 80);
    int t = doc["thread"].GetInt();
    int i = doc["seq"].GetInt();
    std::string pad = doc["pad"].GetString();
    EXPECT_EQ(pad, std::string(pad.size(), static_cast<char>('a' + t)));
    EXPECT_EQ(pad.size(), static_cast<size_t>((t * 997 + i * 131) % 9000));
    EXPECT_TRUE(seen.emplace(t, i).second) << "duplicate " << t << "/" << i;
  }
  EXPECT_EQ(seen.size(), size_t{threads * per_thread});
}

TEST(outbox, async_appends_report_each_line_once_after_its_sync) {
  temp_dir dir;
  auto path = dir.file("outbox.jsonl");
  constexpr int lines = 500;
  std::mutex mtx;
  std::condition_variable cv;
  std::vector<int> reported(lines, 0);
  std::vector<std::string> errors;
  int left = lines;
  for (int i = 0; i < lines; ++i) {
    auto posted = butlers::
      append_outbox_line_async(path, "{\"n\":" + std::to_string(i) + "}",
                               [&, i](std::string error) {
                                 std::lock_guard<std::mutex> guard{mtx};
                                 ++reported[static_cast<size_t>(i)];
                                 if (!error.empty())
                                   errors.push_back(std::move(error));
                                 if (--left == 0)
                                   cv.notify_all();
                               });
    ASSERT_EQ(posted, butlers::outbox_post::queued);
  }
  {
    std::unique_lock<std::mutex> lock{mtx};
    cv.wait(lock, [&] {
      return left == 0;
    });
  }
  EXPECT_TRUE(errors.empty());
  EXPECT_EQ(reported, std::vector<int>(lines, 1));
  bool ends_nl = false;
  auto written = read_lines(path, ends_nl);
  ASSERT_EQ(written.size(), size_t{lines});
  // One writer per file: lines land in the order they were queued.
  for (int i = 0; i < lines; ++i)
    EXPECT_EQ(written[static_cast<size_t>(i)],
              "{\"n\":" + std::to_string(i) + "}");
}

TEST(outbox, async_append_refuses_an_invalid_line_without_calling_back) {
  temp_dir dir;
  auto path = dir.file("outbox.jsonl");
  bool called = false;
  auto posted = butlers::append_outbox_line_async(path, "two\nlines",
                                                  [&](std::string) {
                                                    called = true;
                                                  });
  EXPECT_EQ(posted, butlers::outbox_post::invalid);
  EXPECT_FALSE(called);
  EXPECT_FALSE(fs::exists(path));
}

TEST(outbox, rejects_newlines_and_empty_lines) {
  temp_dir dir;
  auto path = dir.file("outbox.jsonl");
  EXPECT_EQ(append_outbox_line(path, "{\"a\":1}\n{\"b\":2}"),
            path + ": refusing to append a line containing '\\n'");
  EXPECT_EQ(append_outbox_line(path, "{}\n"),
            path + ": refusing to append a line containing '\\n'");
  EXPECT_EQ(append_outbox_line(path, ""),
            path + ": refusing to append an empty line");
  EXPECT_FALSE(fs::exists(path)) << "a rejected line creates nothing";
}

TEST(outbox, reports_an_unwritable_path) {
  temp_dir dir;
  auto missing = dir.file("no-such-dir") + "/outbox.jsonl";
  EXPECT_EQ(append_outbox_line(missing, "{}"),
            missing + ": open: No such file or directory");
  auto is_dir = dir.file("");
  is_dir.pop_back(); // the directory itself, without the trailing slash
  EXPECT_EQ(append_outbox_line(is_dir, "{}"),
            is_dir + ": open: Is a directory");
}
