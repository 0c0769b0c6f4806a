// README.md's "Your first message", run as a newcomer runs it: a node on
// config/node.toml as shipped (its port, its butlers, its outbox in the
// working directory), and the section's shell commands pasted into bash
// as written (the real curl, tail and grep). Only the request id the
// README shows as an example is replaced with the one the node answered.

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "test/support/node_fixture.hpp"
#include "test/support/node_process.hpp"
#include "test/support/poll.hpp"

namespace butlers::test {
namespace {

using namespace std::chrono_literals;

/// The section of `markdown` under the heading `title`, up to the next
/// heading of its level.
std::string section(const std::string& markdown, const std::string& title) {
  auto at = markdown.find("\n" + title + "\n");
  if (at == std::string::npos)
    return {};
  auto end = markdown.find("\n## ", at + title.size() + 2);
  return markdown.substr(at, end == std::string::npos ? end : end - at);
}

/// The fenced blocks of `lang` in `text`, in order.
std::vector<std::string> blocks(const std::string& text,
                                const std::string& lang) {
  std::vector<std::string> out;
  auto open = "```" + lang + "\n";
  for (auto at = text.find(open); at != std::string::npos;
       at = text.find(open, at)) {
    auto body = at + open.size();
    auto close = text.find("\n```", body);
    if (close == std::string::npos)
      break;
    out.push_back(text.substr(body, close - body + 1));
    at = close + 4;
  }
  return out;
}

/// `s` without the whitespace around it.
std::string trimmed(const std::string& s) {
  auto b = s.find_first_not_of(" \n\r\t");
  auto e = s.find_last_not_of(" \n\r\t");
  return b == std::string::npos ? std::string{} : s.substr(b, e - b + 1);
}

/// The first `"key":"VALUE"` of `text` (JSON as the node writes it, without
/// spaces): its VALUE, or "" when there is none.
std::string field(const std::string& text, const std::string& key) {
  auto open = "\"" + key + "\":\"";
  auto at = text.find(open);
  if (at == std::string::npos)
    return {};
  at += open.size();
  auto end = text.find('"', at);
  return end == std::string::npos ? std::string{} : text.substr(at, end - at);
}

/// `text` with every `from` replaced by `to`.
std::string replaced(std::string text, const std::string& from,
                     const std::string& to) {
  for (auto at = text.find(from); !from.empty() && at != std::string::npos;
       at = text.find(from, at + to.size()))
    text.replace(at, from.size(), to);
  return text;
}

/// Runs `script` with bash in `dir`.
process_result shell(const std::string& dir, const std::string& script) {
  return run_process({"/bin/bash", "-c", "cd '" + dir + "' && " + script}, {},
                     30s);
}

class Readme : public node_fixture {};

TEST_F(Readme, YourFirstMessageWorksWhenPastedIntoAShell) {
  auto readme = read_file(std::string{BUTLERS_SOURCE_DIR} + "/README.md");
  auto first = section(readme, "## Your first message");
  ASSERT_FALSE(first.empty()) << "README.md has no '## Your first message'";
  auto sh = blocks(first, "sh");
  auto json = blocks(first, "json");
  ASSERT_GE(sh.size(), 3u) << "send, the reply, the inspection";
  ASSERT_GE(json.size(), 2u) << "the answer and the outbox line";
  // The node as scripts/run.sh starts it: the shipped config, its own
  // database, and the directory it was started from for the outbox.
  use_database("readme");
  use_files("readme");
  node_ = std::make_unique<node_process>(read_file(
                                           std::string{BUTLERS_SOURCE_DIR}
                                           + "/config/node.toml"),
                                         std::map<std::string, std::string>{
                                           {"BUTLERS_DATABASE_URL", url_}},
                                         dir_);
  auto port = node_->wait_listening();
  ASSERT_TRUE(port) << "the node never listened (is port 8470 taken?)\n"
                    << node_->log();
  ASSERT_EQ(*port, 8470) << "the port the README's commands use";
  http_ = std::make_unique<http_client>("127.0.0.1", *port);
  ASSERT_TRUE(eventually(
    [&] {
      return http_->get("/readyz").status == 200;
    },
    30s))
    << node_->log();

  // Send: the answer has the fields the README shows.
  auto sent = shell(dir_, sh[0]);
  ASSERT_EQ(sent.exit_code, 0) << sent.err;
  auto request_id = field(sent.out, "request_id");
  ASSERT_EQ(request_id.size(), 36u) << sent.out;
  auto example_id = field(json[0], "request_id");
  ASSERT_EQ(example_id.size(), 36u) << json[0];
  EXPECT_EQ(trimmed(replaced(sent.out, request_id, "ID")),
            trimmed(replaced(json[0], example_id, "ID")))
    << "the answer as the README shows it";

  // The reply: the last line of the outbox, with the message the README
  // shows (its ids and times are this run's).
  process_result tail;
  ASSERT_TRUE(eventually(
    [&] {
      tail = shell(dir_, sh[1]);
      return tail.out.find(request_id) != std::string::npos;
    },
    30s))
    << tail.out << tail.err << node_->log();
  auto expected_message = field(json[1], "message");
  ASSERT_FALSE(expected_message.empty()) << json[1];
  EXPECT_EQ(field(tail.out, "message"), expected_message) << tail.out;

  // The inspection, with this run's id: the output the README's comment
  // shows.
  auto inspect = sh[2];
  auto comment = inspect.find("\n# ");
  ASSERT_NE(comment, std::string::npos) << "the expected output comment";
  auto expected = inspect.substr(comment + 3);
  expected = expected.substr(0, expected.find('\n'));
  inspect = replaced(inspect.substr(0, comment + 1), example_id, request_id);
  process_result shown;
  ASSERT_TRUE(eventually(
    [&] {
      shown = shell(dir_, inspect);
      return shown.out.find(expected) != std::string::npos;
    },
    30s))
    << "expected " << expected << "\ngot: " << shown.out << shown.err;
}

} // namespace
} // namespace butlers::test
