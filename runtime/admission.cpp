#include "runtime/admission.hpp"

#include "runtime/error.hpp"

namespace butlers {

std::vector<inbox_record> ingest_admission::admit(
  ingest_batch& b, std::vector<inbox_record>& recs, bool draining,
  uint64_t* overloaded) {
  std::vector<inbox_record> admitted;
  auto refuse = [&](size_t i, butlers_errc code, std::string msg) {
    b.out[i].error_code = static_cast<uint8_t>(code);
    b.out[i].error_message = std::move(msg);
  };
  for (size_t i = 0; i < recs.size(); ++i) {
    if (b.out[i].error_code != 0)
      continue; // refused before admission (a rate limit)
    if (draining) {
      refuse(i, butlers_errc::draining, "the node is shutting down");
      continue;
    }
    if (in_flight_ >= max_in_flight_) {
      ++*overloaded;
      refuse(i, butlers_errc::overload_rejected,
             "admission full: " + std::to_string(in_flight_)
               + " requests awaiting commit");
      continue;
    }
    ++in_flight_;
    auto& ctx = recs[i].context;
    auto kept = std::make_shared<inbox_record>();
    kept->context = ctx;
    kept->normalized_text = recs[i].normalized_text;
    kept->schema_version = recs[i].schema_version;
    kept->policy_tier = recs[i].policy_tier.empty() ? "default"
                                                    : recs[i].policy_tier;
    b.admitted.push_back({{ctx.request_id, ctx.received_at_us},
                          recs[i].dedupe_key,
                          order_key_of(ctx),
                          std::move(kept)});
    admitted.push_back(std::move(recs[i]));
    b.slots.push_back(i);
  }
  return admitted;
}

} // namespace butlers
