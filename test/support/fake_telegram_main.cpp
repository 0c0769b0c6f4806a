// butlers-fake-telegram: the test suite's fake Telegram Bot API as a
// program, to try a `telegram` connector in `mode = "poll"` without a bot:
// each line typed on stdin arrives as a text message from a test user, and
// every call the node makes (getUpdates, sendMessage, setMessageReaction)
// is printed. Stops on SIGINT or SIGTERM.

#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <iostream>
#include <string>
#include <thread>

#include <CLI/CLI.hpp>

#include "test/support/fake_telegram.hpp"
#include "test/support/telegram_updates.hpp"

namespace {

using namespace butlers::test;

/// Turns each stdin line into a message Update until `stop` is set.
void read_lines(fake_telegram& tg, int64_t chat_id,
                const std::atomic<bool>& stop) {
  std::string buf;
  while (!stop) {
    pollfd p{STDIN_FILENO, POLLIN, 0};
    if (::poll(&p, 1, 200) != 1)
      continue;
    char chunk[4096];
    auto n = ::read(STDIN_FILENO, chunk, sizeof(chunk));
    if (n <= 0)
      return; // stdin closed: keep serving until a signal
    buf.append(chunk, static_cast<size_t>(n));
    for (auto eol = buf.find('\n'); eol != std::string::npos;
         eol = buf.find('\n')) {
      auto line = buf.substr(0, eol);
      buf.erase(0, eol + 1);
      if (line.empty())
        continue;
      telegram::message_spec m;
      m.chat_id = chat_id;
      m.from.id = chat_id;
      m.message_id = tg.next_message_id(chat_id);
      m.text = line;
      m.date = static_cast<int64_t>(::time(nullptr));
      auto id = tg.push_update(telegram::message_update(m));
      std::printf("queued update %lld (chat %lld, message %lld)\n",
                  static_cast<long long>(id), static_cast<long long>(chat_id),
                  static_cast<long long>(m.message_id));
      std::fflush(stdout);
    }
  }
}

void print_call(const telegram_call& c) {
  std::printf("%s %s %s -> %d%s\n", c.http_method.c_str(),
              c.method.empty() ? "(no method)" : c.method.c_str(),
              c.params_json.c_str(), c.status,
              c.answered ? "" : " (not answered)");
  std::fflush(stdout);
}

} // namespace

int main(int argc, char** argv) {
  CLI::App app{"A local fake of the Telegram Bot API (for trying a telegram "
               "connector in poll mode)"};
  fake_telegram_options opts;
  int64_t chat_id = 1111111;
  bool quiet_polls = false;
  app.add_option("--port", opts.port, "port on 127.0.0.1 (0: any free one)");
  app.add_option("--token", opts.token, "the bot token it accepts")
    ->capture_default_str();
  app.add_option("--chat", chat_id, "chat id of the messages typed on stdin")
    ->capture_default_str();
  app.add_flag("--quiet-polls", quiet_polls,
               "do not print empty getUpdates answers");
  CLI11_PARSE(app, argc, argv);
  opts.on_call = [quiet_polls](const telegram_call& c) {
    if (quiet_polls && c.method == "getUpdates"
        && c.response == R"({"ok":true,"result":[]})")
      return;
    print_call(c);
  };
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr); // every thread inherits it
  fake_telegram tg{opts};
  std::printf("fake Telegram Bot API on %s\n"
              "  api_base = \"%s\"\n  token    = \"%s\"\n"
              "type a line to send it as a message from chat %lld; "
              "Ctrl-C stops\n",
              tg.base_url().c_str(), tg.base_url().c_str(), tg.token().c_str(),
              static_cast<long long>(chat_id));
  std::fflush(stdout);
  std::atomic<bool> stop{false};
  std::thread reader{[&] {
    read_lines(tg, chat_id, stop);
  }};
  int sig = 0;
  sigwait(&signals, &sig);
  stop = true;
  reader.join();
  return 0;
}
