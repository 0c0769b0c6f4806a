#pragma once

// How the switchboard turns one untrusted message into a routing plan (spec
// 001 §6, §15.1, §15.2): the rules router (registry keywords and triggers,
// the embedded default) and the hard allow/deny policy applied after any
// router. The plan itself is in runtime/routing_plan.hpp, the LLM CLI
// router (its prompt and the strict validation of its answer) in
// runtime/cli_router.hpp; both come along with this header. Pure logic, no
// actors, no threads.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "runtime/cli_router.hpp"
#include "runtime/messages.hpp"
#include "runtime/routing_plan.hpp"

namespace butlers {

// -- sentences ----------------------------------------------------------------

/// One sentence: a view into the text and its byte range [begin, end).
struct sentence {
  std::string_view text;
  uint32_t begin = 0;
  uint32_t end = 0;
};

/// Sentences of `text` with their byte ranges. Splits after a run of '.',
/// '!' or '?' (optionally followed by closing quotes or brackets: " ' ) ] }
/// and U+2019, U+201D, U+00BB) that is followed by ASCII whitespace or the
/// end, and at every '\n' and '\r'; trims ASCII whitespace and drops empty
/// pieces. Splits only at ASCII bytes, so never inside a UTF-8 sequence.
/// Abbreviations split ("e.g. this" is two sentences), an ellipsis followed
/// by a space ends a sentence, a decimal point ("3.5") does not. Texts are
/// bounded far below 4 GiB by ingest.v1, so offsets fit 32 bits.
std::vector<sentence> split_sentences(std::string_view text);

// -- eligibility --------------------------------------------------------------

/// True for butlers a plan may name: status "active", name not "messenger"
/// (deliveries only go through notify.v1), and "route.execute" among the
/// capabilities (§15.9).
bool routable(const registry_entry& e);

// -- the rules router ---------------------------------------------------------

/// The rules router (the embedded default). For each sentence, scores every
/// routable butler except `general` (the fallback, never matched by
/// keywords):
/// - each distinct keyword found as a whole word or phrase counts 1;
/// - each trigger counts 0.5 per content word it shares with the sentence,
///   capped at 1 per trigger. Content words have at least 4 code points and
///   are not stop words (a short list of function words such as "that",
///   "with", "please", "would"; see router.cpp).
/// Words are maximal runs of ASCII letters and digits and non-ASCII code
/// points other than Unicode punctuation and spaces (U+2000..U+206F,
/// U+3000..U+303F, U+00A0, U+00A1, U+00AB, U+00BB, U+00BF), compared after
/// ASCII case folding; there is no plural folding or stemming, so "pills"
/// does not match the keyword "pill". A multi-word keyword matches its words
/// in sequence, whatever separates them ("credit card", "credit-card").
///
/// A sentence goes to every butler with the top score (ties: all of them,
/// overlap is allowed, §6.2) if that score is at least 1; otherwise it is
/// unmatched. The sentences of one butler form one segment: prompt = the
/// sentences joined by a space, one span and one offset range per run of
/// consecutive sentences, rationale naming the matched keywords and trigger
/// words. Unmatched sentences, when others matched, form a `general`
/// segment (rationale "unmatched sentences"). Segment ids are "seg-1", ... in
/// order of first sentence, ties in registry order.
///
/// confidence = matched sentences / all sentences. When nothing matched
/// (also: no sentences at all) or confidence < `confidence_threshold`, the
/// plan is one `general` segment with the whole text verbatim, fallback
/// with reason "no_match" or "low_confidence".
routing_plan route_by_rules(std::string_view text,
                            const std::vector<registry_entry>& registry,
                            double confidence_threshold);

// -- policy -------------------------------------------------------------------

/// One hard allow/deny rule (§15.2). Mirrors `routing_rule_config`; the
/// caller converts.
struct routing_rule {
  /// Source channels it applies to; "*" is every channel. Empty: none.
  std::vector<std::string> channels;
  /// When non-empty, only these butlers may be targeted on those channels.
  std::vector<std::string> allow;
  /// Butlers that may never be targeted on those channels.
  std::vector<std::string> deny;
};

/// Applies the hard policy after the router (§15.2: the router's choice
/// cannot bypass it). A butler is denied on `channel` when any rule for that
/// channel lists it in `deny`, or has a non-empty `allow` without it (rules
/// combine: every applicable allow list must name it).
///
/// A segment of a denied butler is re-targeted to `general` with rationale
/// "policy: <butler> denied for <channel>". All general segments then merge
/// into the first: distinct prompts joined by a blank line, spans and
/// offsets unioned, rationales joined by "; " (content that two segments
/// shared appears twice). If `general` itself is denied, such segments and
/// general segments are dropped instead. When nothing is left, the plan is
/// one general segment merging all of the original segments; when
/// everything ended up in one general segment because of the policy, the
/// plan is a fallback with reason "policy" either way.
///
/// Returns how many segments the policy changed: re-targeted or dropped.
size_t apply_policy(routing_plan& plan, std::string_view channel,
                    const std::vector<routing_rule>& rules);

} // namespace butlers
