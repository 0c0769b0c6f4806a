#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/sec.hpp>
#include <gtest/gtest.h>

#include "actors/type_ids.hpp"
#include "runtime/error.hpp"

namespace butlers {
namespace {

TEST(Error, TaxonomyNamesRoundTrip) {
  for (auto x : {butlers_errc::classification_error,
                 butlers_errc::validation_error, butlers_errc::routing_error,
                 butlers_errc::target_unavailable, butlers_errc::timeout,
                 butlers_errc::overload_rejected, butlers_errc::internal_error})
    EXPECT_EQ(normalize_error_class(to_string(x)), x) << to_string(x);
}

TEST(Error, UnknownClassesNormalizeToInternalError) {
  EXPECT_EQ(normalize_error_class("quota_exceeded"),
            butlers_errc::internal_error);
  EXPECT_EQ(normalize_error_class(""), butlers_errc::internal_error);
  EXPECT_EQ(normalize_error_class("Timeout"), butlers_errc::internal_error)
    << "classes are case-sensitive identifiers";
  // Internal codes are not classes a downstream butler may report.
  EXPECT_EQ(normalize_error_class("database_unavailable"),
            butlers_errc::internal_error);
}

TEST(Error, InternalCodesMapOntoTheTaxonomy) {
  EXPECT_EQ(error_class(butlers_errc::database_unavailable),
            butlers_errc::target_unavailable);
  EXPECT_EQ(error_class(butlers_errc::draining),
            butlers_errc::target_unavailable);
  EXPECT_EQ(error_class(butlers_errc::payload_too_large),
            butlers_errc::validation_error);
  EXPECT_EQ(error_class(butlers_errc::timeout), butlers_errc::timeout);
}

TEST(Error, HttpStatuses) {
  EXPECT_EQ(http_status(butlers_errc::validation_error), 400);
  EXPECT_EQ(http_status(butlers_errc::unauthorized), 401);
  EXPECT_EQ(http_status(butlers_errc::payload_too_large), 413);
  EXPECT_EQ(http_status(butlers_errc::unsupported_media_type), 415);
  EXPECT_EQ(http_status(butlers_errc::overload_rejected), 429);
  EXPECT_EQ(http_status(butlers_errc::database_unavailable), 503);
  EXPECT_EQ(http_status(butlers_errc::draining), 503);
  EXPECT_EQ(http_status(butlers_errc::internal_error), 500);
}

TEST(Error, CafErrorsCarryOurCodeAndMessage) {
  caf::error err{butlers_errc::overload_rejected, std::string{"queue full"}};
  EXPECT_EQ(code_of(err), butlers_errc::overload_rejected);
  EXPECT_EQ(message_of(err), "queue full");
  EXPECT_EQ(code_of(caf::error{}), butlers_errc::none);
  EXPECT_EQ(code_of(caf::make_error(caf::sec::request_timeout)),
            butlers_errc::timeout);
  EXPECT_EQ(code_of(caf::make_error(caf::sec::request_receiver_down)),
            butlers_errc::target_unavailable);
  EXPECT_EQ(code_of(caf::make_error(caf::sec::invalid_argument)),
            butlers_errc::internal_error);
}

TEST(Error, RenderedByTheActorSystem) {
  caf::actor_system_config cfg;
  register_types(cfg);
  caf::actor_system sys{cfg};
  caf::error err{butlers_errc::validation_error, std::string{"bad field"}};
  auto text = sys.render(err);
  EXPECT_NE(text.find("validation_error"), std::string::npos) << text;
  EXPECT_NE(text.find("bad field"), std::string::npos) << text;
}

} // namespace
} // namespace butlers
