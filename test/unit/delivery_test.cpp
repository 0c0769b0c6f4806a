// The messenger's channel adapters without actors: which adapters a notify
// goes through, whether a delivery can run without blocking, and the
// report it answers with.

#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <variant>
#include <vector>

#include <gtest/gtest.h>

#include "runtime/delivery.hpp"
#include "runtime/uuid.hpp"
#include "test/support/fake_delivery_services.hpp"

namespace butlers {
namespace {

delivery_adapter_config adapter(adapter_kind kind,
                                std::vector<std::string> channels = {"*"}) {
  delivery_adapter_config cfg;
  cfg.kind = kind;
  cfg.channels = std::move(channels);
  cfg.url = "http://127.0.0.1:9/hook";
  cfg.path = "outbox.jsonl";
  return cfg;
}

std::string notify_on(const std::string& channel) {
  route_envelope env;
  env.request_id = make_uuid_v7().to_string();
  env.received_at = "2026-11-23T04:00:00Z";
  env.source_channel = channel;
  env.source_endpoint_identity = "tests";
  env.source_sender_identity = "user-1";
  return make_notify_json(env, "health", "your reply", "work-1");
}

TEST(Delivery, NoAdaptersConfiguredMeansOneOutbox) {
  auto all = make_delivery_adapters({});
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0]->config().kind, adapter_kind::outbox);
  EXPECT_EQ(all[0]->config().path, "outbox.jsonl");
  EXPECT_TRUE(all[0]->nonblocking());
}

TEST(Delivery, APlanTakesTheAdaptersOfTheChannelInConfiguredOrder) {
  auto all = make_delivery_adapters(
    {adapter(adapter_kind::webhook, {"telegram"}),
     adapter(adapter_kind::outbox, {"api", "telegram"}),
     adapter(adapter_kind::webhook, {"*"})});
  auto planned = plan_delivery(all, notify_on("api"));
  ASSERT_TRUE(std::holds_alternative<delivery_plan>(planned));
  auto& plan = std::get<delivery_plan>(planned);
  ASSERT_EQ(plan.adapters.size(), 2u);
  EXPECT_EQ(plan.adapters[0], all[1]);
  EXPECT_EQ(plan.adapters[1], all[2]);
  EXPECT_FALSE(plan.nonblocking()) << "a webhook blocks";
  EXPECT_EQ(plan.view.channel, "api");
}

TEST(Delivery, AChannelNoAdapterServesIsAValidationError) {
  auto all = make_delivery_adapters(
    {adapter(adapter_kind::outbox, {"telegram"})});
  auto planned = plan_delivery(all, notify_on("api"));
  ASSERT_TRUE(std::holds_alternative<adapter_result>(planned));
  auto& failed = std::get<adapter_result>(planned);
  EXPECT_EQ(failed.error_class, "validation_error");
  EXPECT_NE(failed.message.find("'api'"), std::string::npos);
  auto garbage = plan_delivery(all, "not json");
  ASSERT_TRUE(std::holds_alternative<adapter_result>(garbage));
  EXPECT_EQ(std::get<adapter_result>(garbage).error_class, "validation_error");
}

TEST(Delivery, TheFirstFailedAdapterFailsTheDelivery) {
  auto all = make_delivery_adapters({adapter(adapter_kind::outbox),
                                     adapter(adapter_kind::webhook),
                                     adapter(adapter_kind::outbox)});
  auto plan = std::get<delivery_plan>(plan_delivery(all, notify_on("api")));
  auto ok = delivery_result(plan, {{}, {}, {}});
  EXPECT_TRUE(ok.ok);
  EXPECT_NE(ok.text.find(R"("channel":"api")"), std::string::npos);
  auto failed = delivery_result(plan, {{}, {"webhook down", true, {}}});
  EXPECT_FALSE(failed.ok);
  EXPECT_EQ(failed.error_class, "target_unavailable");
  EXPECT_EQ(failed.message, "webhook down");
  EXPECT_TRUE(failed.retryable);
  auto refused = delivery_result(plan, {{}, {"webhook said 400", false, {}}});
  EXPECT_FALSE(refused.retryable);
}

TEST(Delivery, AnOutboxWritesOneLinePerDelivery) {
  char dir[] = "/tmp/butlers-delivery-XXXXXX";
  ASSERT_NE(::mkdtemp(dir), nullptr);
  auto cfg = adapter(adapter_kind::outbox);
  cfg.path = std::string{dir} + "/outbox.jsonl";
  auto all = make_delivery_adapters({cfg});
  auto notify = notify_on("api");
  auto plan = std::get<delivery_plan>(plan_delivery(all, notify));
  test::fake_delivery_services services;
  auto r = deliver_blocking(plan, notify, "r", "s", services, nullptr);
  EXPECT_TRUE(r.ok) << r.message;
  EXPECT_NE(r.text.find(R"({"kind":"outbox","delivered":true})"),
            std::string::npos);
  std::ifstream in{cfg.path};
  std::string all_text{std::istreambuf_iterator<char>{in}, {}};
  EXPECT_EQ(all_text, R"({"notify":)" + notify + "}\n");
  std::filesystem::remove_all(dir);
}

} // namespace
} // namespace butlers
