// Lifecycle reactions and the outbound ledger's decisions without actors:
// the react notify and its schema, the order of states, which channels
// react, which adapters a reaction goes through, and what a send does given
// what the ledger holds. Also the telegram adapter's configuration checks.

#include <map>
#include <string>
#include <variant>

#include <gtest/gtest.h>

#include "runtime/config.hpp"
#include "runtime/delivery.hpp"
#include "runtime/lifecycle.hpp"
#include "runtime/route.hpp"
#include "runtime/uuid.hpp"

namespace butlers {
namespace {

route_envelope telegram_request() {
  route_envelope env;
  env.request_id = make_uuid_v7().to_string();
  env.received_at = "2026-11-23T04:00:00Z";
  env.source_channel = "telegram";
  env.source_endpoint_identity = "butlers_test_bot";
  env.source_sender_identity = "7";
  return env;
}

// -- the react notify --------------------------------------------------------

TEST(Lifecycle, AReactNotifyIsAValidNotifyThatTheMessengerReads) {
  auto env = telegram_request();
  auto notify = make_react_notify(env, lifecycle_state::queued, 1234567);
  std::string route;
  route_envelope parsed;
  ASSERT_FALSE(
    make_delivery_route(notify, make_uuid_v7().to_string(), 0, route, &parsed))
    << notify;
  EXPECT_EQ(parsed.request_id, env.request_id);
  EXPECT_EQ(parsed.segment_id, "notify:react:queued:1234567");
  EXPECT_EQ(parsed.butler, "messenger");
  auto view = read_notify(notify);
  ASSERT_TRUE(view);
  EXPECT_EQ(view->intent, "react");
  EXPECT_EQ(view->channel, "telegram");
  EXPECT_EQ(view->reaction_state, "queued");
  EXPECT_EQ(view->reaction_at_us, 1234567);
  EXPECT_EQ(view->request_id, env.request_id);
}

TEST(Lifecycle, TerminalStatesOutrankEveryOtherAndLaterOutranksEarlier) {
  using s = lifecycle_state;
  EXPECT_GT(reaction_rank(s::progress, 2), reaction_rank(s::queued, 1));
  EXPECT_GT(reaction_rank(s::queued, 3), reaction_rank(s::progress, 2));
  EXPECT_GT(reaction_rank(s::parsed, 1),
            reaction_rank(s::progress, int64_t{9000000000000000}));
  EXPECT_GT(reaction_rank(s::errored, 1),
            reaction_rank(s::queued, int64_t{9000000000000000}));
  EXPECT_GT(reaction_rank(s::parsed, 5), reaction_rank(s::errored, 4))
    << "a replayed request that parsed after it errored";
  for (auto x : {s::progress, s::queued, s::parsed, s::errored})
    EXPECT_EQ(lifecycle_state_of(to_string(x)), x);
  EXPECT_FALSE(lifecycle_state_of("done"));
}

TEST(Lifecycle, OnlyChannelsOfAReactingAdapterReact) {
  EXPECT_FALSE(lifecycle_policy{}.reacts("telegram"));
  delivery_adapter_config outbox;
  outbox.kind = adapter_kind::outbox;
  outbox.path = "o.jsonl";
  EXPECT_FALSE(lifecycle_policy{{outbox}}.reacts("telegram"));
  delivery_adapter_config tg;
  tg.kind = adapter_kind::telegram;
  tg.connector = "bot";
  lifecycle_policy p{{outbox, tg}};
  EXPECT_TRUE(p.reacts("telegram"));
  EXPECT_FALSE(p.reacts("api")) << "the pipeline benchmark's channel";
  EXPECT_FALSE(p.reacts("email"));
}

TEST(Lifecycle, AReactionGoesOnlyThroughAdaptersThatReact) {
  delivery_adapter_config outbox;
  outbox.kind = adapter_kind::outbox;
  outbox.path = "/dev/null";
  delivery_adapter_config tg;
  tg.kind = adapter_kind::telegram;
  auto notify = make_react_notify(telegram_request(), lifecycle_state::parsed,
                                  1);
  auto with_tg = make_delivery_adapters({outbox, tg});
  auto planned = plan_delivery(with_tg, notify);
  ASSERT_TRUE(std::holds_alternative<delivery_plan>(planned));
  auto& plan = std::get<delivery_plan>(planned);
  ASSERT_EQ(plan.adapters.size(), 1u);
  EXPECT_TRUE(plan.adapters[0]->reacts());
  // Only an outbox: the reaction ends at once, delivered nowhere, no error.
  auto only_outbox = make_delivery_adapters({outbox});
  auto none = plan_delivery(only_outbox, notify);
  ASSERT_TRUE(std::holds_alternative<adapter_result>(none));
  EXPECT_TRUE(std::get<adapter_result>(none).ok);
}

// -- ledger decisions --------------------------------------------------------

TEST(OutboundLedger, DecisionsFollowWhatTheLedgerHolds) {
  using k = outbound_kind;
  using l = ledger_state;
  using d = send_decision;
  EXPECT_EQ(decide_send(k::message, l::none, 0, 0), d::send);
  EXPECT_EQ(decide_send(k::message, l::sending, 0, 0), d::resend);
  EXPECT_EQ(decide_send(k::message, l::sent, 0, 0), d::skip);
  EXPECT_EQ(decide_send(k::mail, l::skipped, 0, 0), d::skip);
  EXPECT_EQ(decide_send(k::message, l::dead, 0, 0), d::send);
  // Reactions: a higher rank recorded supersedes, whatever else.
  EXPECT_EQ(decide_send(k::reaction, l::none, 5, 5), d::send);
  EXPECT_EQ(decide_send(k::reaction, l::none, 5, 9), d::supersede);
  EXPECT_EQ(decide_send(k::reaction, l::sending, 5, 9), d::supersede);
  EXPECT_EQ(decide_send(k::reaction, l::sending, 9, 9), d::resend);
  EXPECT_EQ(decide_send(k::reaction, l::sent, 5, 9), d::skip);
  // Ranks of other kinds mean nothing.
  EXPECT_EQ(decide_send(k::message, l::none, 0, 9), d::send);
  for (auto x : {l::none, l::sending, l::sent, l::skipped, l::dead})
    EXPECT_EQ(ledger_state_of(to_string(x)), x);
}

// -- configuration -----------------------------------------------------------

const char* telegram_file = R"(
[[connector]]
name = "bot"
type = "telegram"
endpoint_identity = "butlers_test_bot"
mode = "poll"
api_base = "http://127.0.0.1:9"

[[messenger.adapter]]
kind = "telegram"
connector = "bot"
timeout_ms = 2000
reactions = { progress = "🤔", queued = "🥱" }
)";

std::map<std::string, std::string> errors_of(const std::string& text,
                                             const char* token = "123:abc") {
  auto res = parse_config(text, "node.toml");
  std::map<std::string, std::string> out;
  for (auto& e : res.errors)
    out[e.key] = e.message;
  if (!res.settings)
    return out;
  auto s = *res.settings;
  apply_env_overrides(s, [token](const char* name) -> const char* {
    return std::string{name} == "BUTLERS_CONNECTOR_BOT_TOKEN" ? token : nullptr;
  });
  for (auto& e : validate_settings(s))
    out[e.key] = e.message;
  return out;
}

std::string keys(const std::map<std::string, std::string>& errors) {
  std::string out;
  for (auto& [k, v] : errors)
    out += k + ": " + v + "\n";
  return out;
}

TEST(TelegramConfig, AnAdapterTakesItsConnectorsTokenAndReactions) {
  auto res = parse_config(telegram_file, "node.toml");
  ASSERT_TRUE(res.settings);
  auto s = *res.settings;
  auto errors = apply_env_overrides(s, [](const char* name) -> const char* {
    return std::string{name} == "BUTLERS_CONNECTOR_BOT_TOKEN" ? "123:abc"
                                                              : nullptr;
  });
  EXPECT_TRUE(errors.empty());
  EXPECT_TRUE(validate_settings(s).empty());
  EXPECT_EQ(s.connectors[0].token, "123:abc");
  EXPECT_EQ(s.connectors[0].api_base, "http://127.0.0.1:9");
  auto& a = s.messenger.adapters[0];
  EXPECT_EQ(a.kind, adapter_kind::telegram);
  EXPECT_EQ(a.connector, "bot");
  EXPECT_EQ(a.reactions.progress, "\xf0\x9f\xa4\x94");
  EXPECT_EQ(a.reactions.queued, "\xf0\x9f\xa5\xb1");
  EXPECT_EQ(a.reactions.parsed, "\xf0\x9f\x91\x8d") << "the default";
  EXPECT_EQ(a.reactions.errored, "\xf0\x9f\x91\xbe") << "the default";
  // check-config prints it back (the token redacted) and it reads back.
  auto text = to_toml(s);
  EXPECT_EQ(text.find("123:abc"), std::string::npos) << text;
  auto back = parse_config(text, "out.toml");
  ASSERT_TRUE(back.settings) << text;
  EXPECT_EQ(back.settings->messenger.adapters[0], a);
}

TEST(TelegramConfig, AnEmojiTelegramDoesNotAllowIsAnErrorNamingTheKey) {
  std::string text = telegram_file;
  text.replace(text.find("🥱"), std::string{"🥱"}.size(), "🚀");
  auto errors = errors_of(text);
  ASSERT_EQ(errors.count("messenger.adapter[0].reactions.queued"), 1u);
  EXPECT_NE(errors["messenger.adapter[0].reactions.queued"].find(
              "not one of Telegram's reaction emoji"),
            std::string::npos);
  // A variation selector after a listed emoji: the listed form is named.
  std::string heart = telegram_file;
  heart.replace(heart.find("🤔"), std::string{"🤔"}.size(),
                "\xe2\x9d\xa4\xef\xb8\x8f");
  auto e = errors_of(heart)["messenger.adapter[0].reactions.progress"];
  EXPECT_NE(e.find("write '\xe2\x9d\xa4'"), std::string::npos) << e;
  // Unknown keys of the table are errors too.
  std::string typo = telegram_file;
  typo.replace(typo.find("queued"), 6, "queue");
  auto typos = errors_of(typo);
  EXPECT_EQ(typos.count("messenger.adapter[0].reactions.queue"), 1u)
    << keys(typos);
}

TEST(TelegramConfig, TheConnectorMustExistBeTelegramAndHaveAToken) {
  auto no_token = errors_of(telegram_file, nullptr);
  ASSERT_EQ(no_token.count("messenger.adapter[0].connector"), 1u);
  EXPECT_NE(no_token["messenger.adapter[0].connector"].find(
              "BUTLERS_CONNECTOR_BOT_TOKEN"),
            std::string::npos);
  std::string other = telegram_file;
  other.replace(other.find("connector = \"bot\""), 17, "connector = \"nobot\"");
  EXPECT_NE(errors_of(other)["messenger.adapter[0].connector"].find(
              "no [[connector]] is named 'nobot'"),
            std::string::npos);
  std::string missing = telegram_file;
  missing.replace(missing.find("connector = \"bot\""), 17, "");
  EXPECT_EQ(errors_of(missing).count("messenger.adapter[0].connector"), 1u);
  std::string jsonl = telegram_file;
  jsonl.replace(jsonl.find("type = \"telegram\""), 17,
                "type = \"jsonl\"\npath = \"x.jsonl\"");
  EXPECT_NE(errors_of(jsonl)["messenger.adapter[0].connector"].find(
              "not 'telegram'"),
            std::string::npos);
  std::string channels = telegram_file;
  channels.replace(channels.find("timeout_ms"), 0, "channels = [\"email\"]\n");
  EXPECT_EQ(errors_of(channels).count("messenger.adapter[0].channels"), 1u);
}

} // namespace
} // namespace butlers
