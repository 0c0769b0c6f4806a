#include <algorithm>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "runtime/config.hpp"

// config/README.md documents every option in one table per section. These
// tests hold those tables to the field lists the parser runs on, so that the
// reference cannot drift from the code.

using namespace butlers;

namespace {

/// The repository root (test/CMakeLists.txt defines it for the unit tests).
std::string source_dir() {
  return BUTLERS_SOURCE_DIR;
}

/// One row of a reference table: key, type, default and range as written.
struct row {
  std::string type;
  std::string default_value;
  std::string range;
};

/// Section header ("[http]") -> key -> row.
using reference_tables = std::map<std::string, std::map<std::string, row>>;

std::string trim(const std::string& x) {
  auto b = x.find_first_not_of(' ');
  auto e = x.find_last_not_of(' ');
  return b == std::string::npos ? std::string{} : x.substr(b, e - b + 1);
}

/// The text between the first pair of backticks, or "".
std::string first_code(const std::string& x) {
  auto b = x.find('`');
  auto e = b == std::string::npos ? b : x.find('`', b + 1);
  return e == std::string::npos ? std::string{} : x.substr(b + 1, e - b - 1);
}

std::vector<std::string> cells_of(const std::string& line) {
  std::vector<std::string> cells;
  std::stringstream in{line.substr(1)}; // after the leading '|'
  std::string cell;
  while (std::getline(in, cell, '|'))
    cells.push_back(trim(cell));
  return cells;
}

/// Reads the key tables under the "### `[section]`" headings of the README.
reference_tables read_readme() {
  reference_tables out;
  std::ifstream in{source_dir() + "/config/README.md"};
  EXPECT_TRUE(in) << "cannot read config/README.md";
  std::string line;
  std::string header; // "" outside a section's heading
  while (std::getline(in, line)) {
    if (line.rfind("#", 0) == 0) {
      header = line.rfind("### `", 0) == 0 ? first_code(line) : "";
      continue;
    }
    if (header.empty() || line.rfind("| `", 0) != 0)
      continue;
    auto cells = cells_of(line);
    if (cells.size() < 4)
      continue;
    out[header][first_code(cells[0])] = row{cells[1], cells[2], cells[3]};
  }
  return out;
}

/// How the README writes a default: in backticks, except "required" and
/// "unset".
std::string written(const option_reference& o) {
  if (o.default_value == "required" || o.default_value == "unset")
    return o.default_value;
  return "`" + o.default_value + "`";
}

} // namespace

TEST(config_reference, readme_documents_every_declared_option) {
  auto readme = read_readme();
  for (auto& section : config_reference()) {
    SCOPED_TRACE(section.header);
    auto table = readme.find(section.header);
    ASSERT_TRUE(table != readme.end())
      << "config/README.md has no \"### `" << section.header << "`\" table";
    for (auto& o : section.options) {
      SCOPED_TRACE(o.key);
      auto r = table->second.find(o.key);
      ASSERT_TRUE(r != table->second.end()) << "no row for `" << o.key << "`";
      EXPECT_EQ(r->second.type, o.type);
      EXPECT_EQ(r->second.default_value, written(o));
      if (!o.bounds.empty()) {
        EXPECT_NE(r->second.range.find(o.bounds), std::string::npos)
          << "range should say " << o.bounds << ", says " << r->second.range;
      }
      for (auto& choice : o.choices) {
        EXPECT_NE(r->second.range.find("`" + choice + "`"), std::string::npos)
          << "range should list `" << choice << "`, says " << r->second.range;
      }
    }
  }
}

TEST(config_reference, readme_names_no_undeclared_option) {
  std::map<std::string, std::vector<std::string>> declared;
  for (auto& section : config_reference())
    for (auto& o : section.options)
      declared[section.header].push_back(o.key);
  for (auto& [header, rows] : read_readme()) {
    SCOPED_TRACE(header);
    auto keys = declared.find(header);
    ASSERT_TRUE(keys != declared.end()) << "README documents an unknown table";
    for (auto& [key, r] : rows)
      EXPECT_TRUE(std::find(keys->second.begin(), keys->second.end(), key)
                  != keys->second.end())
        << "README documents `" << key << "`, which no field list declares";
  }
}

TEST(config_reference, declared_defaults_are_the_defaults_the_parser_gives) {
  // The reference prints each default from a default-constructed section;
  // an empty file must read back as exactly those settings.
  auto res = parse_config("", "empty.toml");
  ASSERT_TRUE(res.settings);
  EXPECT_EQ(*res.settings, node_settings{});
  auto printed = to_toml(node_settings{});
  for (auto& section : config_reference()) {
    if (section.header.rfind("[[", 0) == 0 || section.header == "[cluster.tls]"
        || section.header == "[butler.runtime]"
        || section.header.rfind("[messenger.adapter.reactions]", 0) == 0)
      continue; // printed only when entries (or TLS) exist
    auto at = printed.find("\n" + section.header + "\n");
    ASSERT_NE(at, std::string::npos) << section.header;
    for (auto& o : section.options)
      EXPECT_NE(printed.find("\n" + o.key + " = " + o.default_value + "\n", at),
                std::string::npos)
        << section.header << " " << o.key;
  }
}
