#include "runtime/router.hpp"

#include <algorithm>
#include <cstdio>
#include <optional>
#include <string_view>
#include <unordered_set>

#include "runtime/json.hpp"
#include "runtime/router_detail.hpp"

namespace butlers {

// -- shared with the cli router -----------------------------------------------

namespace router_detail {

std::string truncated(std::string s, size_t max) {
  if (s.size() <= max)
    return s;
  size_t n = max;
  while (n > 0 && is_continuation(static_cast<unsigned char>(s[n])))
    --n;
  s.resize(n);
  return s;
}

std::string join(const std::vector<std::string>& xs, std::string_view sep) {
  std::string out;
  for (size_t i = 0; i < xs.size(); ++i) {
    if (i > 0)
      out += sep;
    out += xs[i];
  }
  return out;
}

routing_plan whole_text_fallback(std::string_view text, std::string reason,
                                 std::string rationale, std::string router) {
  plan_segment seg;
  seg.segment_id = "seg-1";
  seg.butler = "general";
  seg.prompt = std::string{text};
  auto sentences = split_sentences(text);
  if (!sentences.empty())
    seg.sentence_spans.emplace_back(0, static_cast<uint32_t>(sentences.size()
                                                             - 1));
  if (!text.empty())
    seg.offsets.emplace_back(0, static_cast<uint32_t>(text.size()));
  seg.rationale = truncated(std::move(rationale), 4096);
  routing_plan plan;
  plan.segments.push_back(std::move(seg));
  plan.fallback = true;
  plan.fallback_reason = std::move(reason);
  plan.router = std::move(router);
  return plan;
}

} // namespace router_detail

namespace {

using json::quote;
using router_detail::ascii_lower;
using router_detail::is_continuation;
using router_detail::is_space;
using router_detail::join;
using router_detail::truncated;
using router_detail::whole_text_fallback;

// -- text helpers -------------------------------------------------------------

/// Decodes the UTF-8 sequence at `s[i]`: its code point and length. An
/// invalid or truncated sequence is one byte standing for U+FFFD.
std::pair<uint32_t, size_t> decode(std::string_view s, size_t i) {
  auto b = static_cast<unsigned char>(s[i]);
  if (b < 0x80)
    return {b, 1};
  size_t len = b >= 0xF0 && b <= 0xF4   ? 4
               : b >= 0xE0 && b <= 0xEF ? 3
               : b >= 0xC2 && b <= 0xDF ? 2
                                        : 0;
  if (len == 0 || i + len > s.size())
    return {0xFFFD, 1};
  uint32_t cp = b & (0x7F >> len);
  for (size_t k = 1; k < len; ++k) {
    auto c = static_cast<unsigned char>(s[i + k]);
    if (!is_continuation(c))
      return {0xFFFD, 1};
    cp = (cp << 6) | (c & 0x3F);
  }
  return {cp, len};
}

/// Closing quotes and brackets a sentence may end with after its
/// punctuation; returns the length of the one at `s[i]`, or 0.
size_t closer_at(std::string_view s, size_t i) {
  switch (s[i]) {
    case '"':
    case '\'':
    case ')':
    case ']':
    case '}': return 1;
    default: break;
  }
  auto [cp, len] = decode(s, i);
  return cp == 0x2019 || cp == 0x201D || cp == 0x00BB ? len : 0;
}

/// Whether the code point belongs to a word: ASCII letters and digits, and
/// any non-ASCII code point except Unicode punctuation and spaces.
bool is_word_code_point(uint32_t cp) {
  if (cp < 0x80)
    return (cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z')
           || (cp >= '0' && cp <= '9');
  if ((cp >= 0x2000 && cp <= 0x206F) || (cp >= 0x3000 && cp <= 0x303F))
    return false;
  switch (cp) {
    case 0xA0:
    case 0xA1:
    case 0xAB:
    case 0xBB:
    case 0xBF: return false;
    default: return true;
  }
}

/// The words of `s`, ASCII-lowercased.
std::vector<std::string> words_of(std::string_view s) {
  std::vector<std::string> out;
  std::string word;
  for (size_t i = 0; i < s.size();) {
    auto [cp, len] = decode(s, i);
    if (is_word_code_point(cp)) {
      for (size_t k = 0; k < len; ++k)
        word += ascii_lower(s[i + k]);
    } else if (!word.empty()) {
      out.push_back(std::move(word));
      word.clear();
    }
    i += len;
  }
  if (!word.empty())
    out.push_back(std::move(word));
  return out;
}

void add_unique(std::vector<std::string>& xs, const std::string& x) {
  if (std::find(xs.begin(), xs.end(), x) == xs.end())
    xs.push_back(x);
}

bool contains(const std::vector<std::string>& xs, std::string_view x) {
  return std::find(xs.begin(), xs.end(), x) != xs.end();
}

// -- the rules router ---------------------------------------------------------

/// Function words of at least four letters, which would otherwise make
/// every trigger match every chatty sentence. Shorter words never count.
const std::unordered_set<std::string_view>& stop_words() {
  static const std::unordered_set<std::string_view> words{
    "about", "after",  "again",  "also",  "been",   "before", "being", "could",
    "does",  "doing",  "from",   "have",  "having", "here",   "into",  "just",
    "like",  "make",   "more",   "most",  "much",   "need",   "only",  "other",
    "over",  "please", "should", "some",  "such",   "than",   "that",  "their",
    "them",  "then",   "there",  "these", "they",   "this",   "those", "very",
    "want",  "what",   "when",   "where", "which",  "while",  "will",  "with",
    "would", "your",   "yours",
  };
  return words;
}

bool is_content_word(const std::string& w) {
  return json::code_points(w) >= 4 && stop_words().count(w) == 0;
}

bool has_phrase(const std::vector<std::string>& words,
                const std::vector<std::string>& phrase) {
  if (phrase.empty() || phrase.size() > words.size())
    return false;
  for (size_t i = 0; i + phrase.size() <= words.size(); ++i)
    if (std::equal(phrase.begin(), phrase.end(), words.begin() + i))
      return true;
  return false;
}

/// A routable butler, prepared for scoring.
struct matcher {
  const registry_entry* entry = nullptr;
  /// Each distinct keyword as its words.
  std::vector<std::vector<std::string>> keywords;
  /// Each trigger as its distinct content words.
  std::vector<std::vector<std::string>> triggers;
  /// Sentences it won, ascending.
  std::vector<uint32_t> sentences;
  /// For the rationale, in order of first match.
  std::vector<std::string> keyword_hits;
  std::vector<std::string> trigger_hits;
};

matcher make_matcher(const registry_entry& e) {
  matcher m;
  m.entry = &e;
  for (auto& k : e.keywords) {
    auto ws = words_of(k);
    if (!ws.empty()
        && std::find(m.keywords.begin(), m.keywords.end(), ws)
             == m.keywords.end())
      m.keywords.push_back(std::move(ws));
  }
  for (auto& t : e.triggers) {
    std::vector<std::string> content;
    for (auto& w : words_of(t))
      if (is_content_word(w))
        add_unique(content, w);
    if (!content.empty())
      m.triggers.push_back(std::move(content));
  }
  return m;
}

/// The segment of `indices` (ascending) of `sentences`.
plan_segment make_segment(const std::vector<sentence>& sentences,
                          const std::vector<uint32_t>& indices) {
  plan_segment seg;
  for (size_t i = 0; i < indices.size(); ++i) {
    auto idx = indices[i];
    if (i > 0)
      seg.prompt += ' ';
    seg.prompt += sentences[idx].text;
    if (i > 0 && indices[i - 1] + 1 == idx) {
      seg.sentence_spans.back().second = idx;
      seg.offsets.back().second = sentences[idx].end;
    } else {
      seg.sentence_spans.emplace_back(idx, idx);
      seg.offsets.emplace_back(sentences[idx].begin, sentences[idx].end);
    }
  }
  return seg;
}

/// The routable butlers the rules may pick, each once, in registry order:
/// `general` is the fallback and never matched by keywords.
std::vector<matcher> matchers_of(const std::vector<registry_entry>& registry) {
  std::vector<matcher> ms;
  for (auto& e : registry) {
    if (!routable(e) || e.name == "general")
      continue;
    auto dup = std::any_of(ms.begin(), ms.end(), [&](const matcher& m) {
      return m.entry->name == e.name;
    });
    if (!dup)
      ms.push_back(make_matcher(e));
  }
  return ms;
}

/// How well one sentence matches one butler, and by what.
struct sentence_score {
  double value = 0;
  /// Keywords found, each as its words joined by a space.
  std::vector<std::string> keywords;
  /// Content words shared with a trigger.
  std::vector<std::string> trigger_words;
};

/// Scores the `words` of one sentence for `m` (see `route_by_rules`).
sentence_score score(const matcher& m, const std::vector<std::string>& words) {
  sentence_score s;
  for (auto& k : m.keywords)
    if (has_phrase(words, k)) {
      s.value += 1;
      s.keywords.push_back(join(k, " "));
    }
  for (auto& t : m.triggers) {
    double shared = 0;
    for (auto& w : t)
      if (contains(words, w)) {
        shared += 0.5;
        s.trigger_words.push_back(w);
      }
    s.value += std::min(shared, 1.0);
  }
  return s;
}

/// Gives each sentence to every matcher with the top score, if that score
/// is at least 1, collecting what matched for the rationale. Returns the
/// sentences that went to nobody, ascending.
std::vector<uint32_t> assign_sentences(const std::vector<sentence>& sentences,
                                       std::vector<matcher>& ms) {
  std::vector<uint32_t> unmatched;
  std::vector<sentence_score> scores(ms.size());
  for (uint32_t si = 0; si < sentences.size(); ++si) {
    auto words = words_of(sentences[si].text);
    double top = 0;
    for (size_t mi = 0; mi < ms.size(); ++mi) {
      scores[mi] = score(ms[mi], words);
      top = std::max(top, scores[mi].value);
    }
    if (top < 1) {
      unmatched.push_back(si);
      continue;
    }
    for (size_t mi = 0; mi < ms.size(); ++mi) {
      if (scores[mi].value != top)
        continue;
      ms[mi].sentences.push_back(si);
      for (auto& k : scores[mi].keywords)
        add_unique(ms[mi].keyword_hits, k);
      for (auto& w : scores[mi].trigger_words)
        add_unique(ms[mi].trigger_hits, w);
    }
  }
  return unmatched;
}

/// The segment of the sentences `m` won, with a rationale naming what
/// matched.
plan_segment butler_segment(const std::vector<sentence>& sentences,
                            const matcher& m) {
  auto seg = make_segment(sentences, m.sentences);
  seg.butler = m.entry->name;
  std::vector<std::string> why;
  if (!m.keyword_hits.empty())
    why.push_back("keywords: " + join(m.keyword_hits, ", "));
  if (!m.trigger_hits.empty())
    why.push_back("trigger words: " + join(m.trigger_hits, ", "));
  seg.rationale = truncated(join(why, "; "), 4096);
  return seg;
}

/// The plan of the rules router once sentences were assigned: a segment
/// per butler that won any, the `unmatched` ones as a general segment,
/// numbered in order of first sentence (ties in registry order).
routing_plan plan_of(const std::vector<sentence>& sentences,
                     const std::vector<matcher>& ms,
                     const std::vector<uint32_t>& unmatched) {
  // (first sentence, registry order) -> segment, general last on ties
  // (which cannot happen: its sentences are exactly the unmatched ones).
  std::vector<std::pair<std::pair<uint32_t, size_t>, plan_segment>> parts;
  for (size_t mi = 0; mi < ms.size(); ++mi)
    if (!ms[mi].sentences.empty())
      parts.emplace_back(std::make_pair(ms[mi].sentences.front(), mi),
                         butler_segment(sentences, ms[mi]));
  if (!unmatched.empty()) {
    auto seg = make_segment(sentences, unmatched);
    seg.butler = "general";
    seg.rationale = "unmatched sentences";
    parts.emplace_back(std::make_pair(unmatched.front(), ms.size()),
                       std::move(seg));
  }
  std::sort(parts.begin(), parts.end(), [](auto& x, auto& y) {
    return x.first < y.first;
  });
  routing_plan plan;
  plan.router = "rules";
  for (auto& [key, seg] : parts) {
    seg.segment_id = "seg-" + std::to_string(plan.segments.size() + 1);
    plan.segments.push_back(std::move(seg));
  }
  return plan;
}

// -- policy -------------------------------------------------------------------

template<class T>
void coalesce(std::vector<std::pair<T, T>>& xs, T gap) {
  std::sort(xs.begin(), xs.end());
  std::vector<std::pair<T, T>> out;
  for (auto& x : xs)
    if (!out.empty()
        && (x.first <= out.back().second || x.first - out.back().second <= gap))
      out.back().second = std::max(out.back().second, x.second);
    else
      out.push_back(x);
  xs = std::move(out);
}

/// Segments being merged into one general segment.
struct merged {
  plan_segment seg;
  std::vector<std::string> prompts;
  std::vector<std::string> rationales;

  void add(plan_segment x) {
    if (prompts.empty())
      seg.segment_id = x.segment_id;
    add_unique(prompts, x.prompt);
    if (!x.rationale.empty())
      add_unique(rationales, x.rationale);
    seg.sentence_spans.insert(seg.sentence_spans.end(),
                              x.sentence_spans.begin(), x.sentence_spans.end());
    seg.offsets.insert(seg.offsets.end(), x.offsets.begin(), x.offsets.end());
  }

  plan_segment finish() && {
    seg.butler = "general";
    seg.prompt = join(prompts, "\n\n");
    seg.rationale = truncated(join(rationales, "; "), 4096);
    coalesce<uint32_t>(seg.sentence_spans, 1);
    coalesce<uint32_t>(seg.offsets, 0);
    return std::move(seg);
  }
};

} // namespace

// -- plans --------------------------------------------------------------------

std::string to_json(const routing_plan& p) {
  std::string out = R"({"schema_version":"router_plan.v1","segments":[)";
  for (size_t i = 0; i < p.segments.size(); ++i) {
    auto& s = p.segments[i];
    if (i > 0)
      out += ',';
    out += R"({"segment_id":)";
    out += quote(s.segment_id);
    out += R"(,"butler":)";
    out += quote(s.butler);
    out += R"(,"prompt":)";
    out += quote(s.prompt);
    if (!s.sentence_spans.empty()) {
      out += R"(,"sentence_spans":[)";
      for (size_t j = 0; j < s.sentence_spans.size(); ++j) {
        if (j > 0)
          out += ',';
        out += '[' + std::to_string(s.sentence_spans[j].first) + ','
               + std::to_string(s.sentence_spans[j].second) + ']';
      }
      out += ']';
    }
    if (!s.offsets.empty()) {
      out += R"(,"offsets":[)";
      for (size_t j = 0; j < s.offsets.size(); ++j) {
        if (j > 0)
          out += ',';
        out += R"({"start":)" + std::to_string(s.offsets[j].first)
               + R"(,"end":)" + std::to_string(s.offsets[j].second) + '}';
      }
      out += ']';
    }
    if (!s.rationale.empty()) {
      out += R"(,"rationale":)";
      out += quote(s.rationale);
    }
    out += '}';
  }
  out += "]}";
  return out;
}

// -- sentences ----------------------------------------------------------------

std::vector<sentence> split_sentences(std::string_view text) {
  std::vector<sentence> out;
  auto emit = [&](size_t begin, size_t end) {
    while (begin < end && is_space(text[begin]))
      ++begin;
    while (end > begin && is_space(text[end - 1]))
      --end;
    if (begin < end)
      out.push_back(sentence{text.substr(begin, end - begin),
                             static_cast<uint32_t>(begin),
                             static_cast<uint32_t>(end)});
  };
  size_t start = 0;
  size_t i = 0;
  while (i < text.size()) {
    char c = text[i];
    if (c == '\n' || c == '\r') {
      emit(start, i);
      start = ++i;
    } else if (c == '.' || c == '!' || c == '?') {
      size_t j = i;
      while (j < text.size()
             && (text[j] == '.' || text[j] == '!' || text[j] == '?'))
        ++j;
      while (j < text.size())
        if (auto n = closer_at(text, j); n > 0)
          j += n;
        else
          break;
      if (j == text.size() || is_space(text[j])) {
        emit(start, j);
        start = j;
      }
      i = j;
    } else {
      ++i;
    }
  }
  emit(start, text.size());
  return out;
}

// -- eligibility --------------------------------------------------------------

bool routable(const registry_entry& e) {
  return e.status == "active" && e.name != "messenger"
         && contains(e.capabilities, "route.execute");
}

// -- the rules router ---------------------------------------------------------

routing_plan route_by_rules(std::string_view text,
                            const std::vector<registry_entry>& registry,
                            double confidence_threshold) {
  auto ms = matchers_of(registry);
  auto sentences = split_sentences(text);
  auto unmatched = assign_sentences(sentences, ms);
  auto total = sentences.size();
  auto matched = total - unmatched.size();
  double confidence = total == 0 ? 0.0 : static_cast<double>(matched) / total;
  if (matched == 0) {
    auto plan = whole_text_fallback(text, "no_match",
                                    "no_match: no butler matched any sentence",
                                    "rules");
    plan.confidence = confidence;
    return plan;
  }
  if (confidence < confidence_threshold) {
    char buf[160];
    std::snprintf(buf, sizeof(buf),
                  "low_confidence: %zu of %zu sentences matched "
                  "(confidence %.2f < %.2f)",
                  matched, total, confidence, confidence_threshold);
    auto plan = whole_text_fallback(text, "low_confidence", buf, "rules");
    plan.confidence = confidence;
    return plan;
  }
  auto plan = plan_of(sentences, ms, unmatched);
  plan.confidence = confidence;
  return plan;
}

// -- policy -------------------------------------------------------------------

size_t apply_policy(routing_plan& plan, std::string_view channel,
                    const std::vector<routing_rule>& rules) {
  std::vector<const routing_rule*> applicable;
  for (auto& r : rules)
    if (contains(r.channels, channel) || contains(r.channels, "*"))
      applicable.push_back(&r);
  if (applicable.empty())
    return 0;
  auto denied = [&](const std::string& butler) {
    return std::any_of(applicable.begin(), applicable.end(), [&](auto r) {
      return contains(r->deny, butler)
             || (!r->allow.empty() && !contains(r->allow, butler));
    });
  };
  auto because = [&](const std::string& butler) {
    return "policy: " + butler + " denied for " + std::string{channel};
  };
  bool general_denied = denied("general");
  size_t changed = 0;
  std::vector<plan_segment> out;
  std::optional<size_t> general_at;
  merged general;
  merged everything;
  for (auto& seg : plan.segments) {
    everything.add(seg);
    bool is_general = seg.butler == "general";
    if (!is_general && !denied(seg.butler)) {
      out.push_back(std::move(seg));
      continue;
    }
    if (general_denied) {
      everything.rationales.push_back(because(seg.butler));
      ++changed;
      continue;
    }
    if (!is_general) {
      seg.rationale = because(seg.butler);
      ++changed;
    }
    if (!general_at) {
      general_at = out.size();
      out.emplace_back();
    }
    general.add(std::move(seg));
  }
  if (general_at)
    out[*general_at] = std::move(general).finish();
  if (out.empty()) {
    // Every rationale so far belongs to a dropped segment; keep the policy
    // ones only, which say why.
    std::vector<std::string> why;
    for (auto& r : everything.rationales)
      if (r.compare(0, 7, "policy:") == 0)
        add_unique(why, r);
    everything.rationales = std::move(why);
    out.push_back(std::move(everything).finish());
  }
  plan.segments = std::move(out);
  if (changed > 0 && plan.segments.size() == 1
      && plan.segments.front().butler == "general") {
    plan.fallback = true;
    plan.fallback_reason = "policy";
  }
  return changed;
}

} // namespace butlers
