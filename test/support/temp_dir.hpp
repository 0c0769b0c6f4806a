#pragma once

// A fresh directory under the system temp dir for one test, removed with
// everything in it afterwards.

#include <stdlib.h>

#include <filesystem>
#include <string>
#include <system_error>

#include <gtest/gtest.h>

namespace butlers::test {

class temp_dir {
 public:
  temp_dir() {
    auto pattern = (std::filesystem::temp_directory_path()
                    / "butlers-test-XXXXXX")
                     .string();
    if (::mkdtemp(pattern.data()) == nullptr)
      ADD_FAILURE() << "mkdtemp failed";
    path_ = pattern;
  }

  ~temp_dir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }

  temp_dir(const temp_dir&) = delete;
  temp_dir& operator=(const temp_dir&) = delete;

  const std::filesystem::path& path() const {
    return path_;
  }

  std::string str() const {
    return path_.string();
  }

  /// The path of `name` inside the directory.
  std::string file(const char* name) const {
    return (path_ / name).string();
  }

 private:
  std::filesystem::path path_;
};

} // namespace butlers::test
