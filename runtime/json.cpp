#include "runtime/json.hpp"

#include <cstdint>
#include <cstring>
#include <vector>

#include <rapidjson/error/en.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

namespace butlers::json {

namespace {

/// Length of the well-formed UTF-8 sequence starting at `s[i]`, or 0 if the
/// bytes there are not one (overlong forms and surrogates included).
size_t utf8_sequence_length(std::string_view s, size_t i) {
  auto byte = [&](size_t k) {
    return static_cast<uint8_t>(s[k]);
  };
  auto cont = [&](size_t k) {
    return k < s.size() && (byte(k) & 0xC0) == 0x80;
  };
  uint8_t b = byte(i);
  if (b < 0x80)
    return 1;
  if (b >= 0xC2 && b <= 0xDF)
    return cont(i + 1) ? 2 : 0;
  if (b >= 0xE0 && b <= 0xEF) {
    if (!cont(i + 1) || !cont(i + 2))
      return 0;
    uint8_t b1 = byte(i + 1);
    if ((b == 0xE0 && b1 < 0xA0) || (b == 0xED && b1 >= 0xA0))
      return 0;
    return 3;
  }
  if (b >= 0xF0 && b <= 0xF4) {
    if (!cont(i + 1) || !cont(i + 2) || !cont(i + 3))
      return 0;
    uint8_t b1 = byte(i + 1);
    if ((b == 0xF0 && b1 < 0x90) || (b == 0xF4 && b1 >= 0x90))
      return 0;
    return 4;
  }
  return 0;
}

constexpr uint64_t high_bits = 0x8080808080808080ULL;

/// The next 8 bytes of `s` from `i` as one word (caller checks the bounds).
uint64_t word_at(std::string_view s, size_t i) {
  uint64_t w;
  std::memcpy(&w, s.data() + i, sizeof w);
  return w;
}

} // namespace

bool is_ascii(std::string_view text) {
  // A word at a time, no early exit: GCC's -O2 does not vectorize the
  // byte loop, which cost a tenth of the ingest fast path.
  uint64_t any = 0;
  size_t i = 0;
  for (; i + 8 <= text.size(); i += 8)
    any |= word_at(text, i);
  for (; i < text.size(); ++i)
    any |= static_cast<unsigned char>(text[i]);
  return (any & high_bits) == 0;
}

size_t code_points(std::string_view s) {
  size_t n = 0;
  for (char c : s)
    n += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  return n;
}

bool is_utf8(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    // Runs of ASCII a word at a time.
    if (i + 8 <= s.size() && (word_at(s, i) & high_bits) == 0) {
      i += 8;
      continue;
    }
    auto n = utf8_sequence_length(s, i);
    if (n == 0)
      return false;
    i += n;
  }
  return true;
}

namespace {

/// True when every string (keys included) is well-formed UTF-8. RapidJSON
/// 1.1 decodes a lone low-surrogate escape (`\udc00`) into bytes that are
/// not, and nothing downstream can store them.
bool strings_are_utf8(const rapidjson::Value& root) {
  auto ok = [](const rapidjson::Value& str) {
    return is_utf8({str.GetString(), str.GetStringLength()});
  };
  // Iterative: a caller may allow deep nesting.
  std::vector<const rapidjson::Value*> todo{&root};
  while (!todo.empty()) {
    auto& v = *todo.back();
    todo.pop_back();
    if (v.IsString()) {
      if (!ok(v))
        return false;
    } else if (v.IsArray()) {
      for (auto& e : v.GetArray())
        todo.push_back(&e);
    } else if (v.IsObject()) {
      for (auto& m : v.GetObject()) {
        if (!ok(m.name))
          return false;
        todo.push_back(&m.value);
      }
    }
  }
  return true;
}

/// Finds the first byte at which `text` nests deeper than `max_depth`. A
/// linear scan that skips string contents (and their escapes); it does not
/// validate anything else, the parser does that afterwards.
std::optional<size_t> find_too_deep(std::string_view text, size_t max_depth) {
  size_t depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (in_string) {
      if (c == '\\')
        ++i;
      else if (c == '"')
        in_string = false;
      continue;
    }
    switch (c) {
      case '"': in_string = true; break;
      case '[':
      case '{':
        if (++depth > max_depth)
          return i;
        break;
      case ']':
      case '}':
        if (depth > 0)
          --depth;
        break;
      default: break;
    }
  }
  return std::nullopt;
}

} // namespace

std::optional<parse_error> parse(std::string_view text,
                                 rapidjson::Document& doc,
                                 const parse_limits& limits) {
  if (text.size() > limits.max_bytes)
    return parse_error{"document of " + std::to_string(text.size())
                         + " bytes exceeds the limit of "
                         + std::to_string(limits.max_bytes) + " bytes",
                       limits.max_bytes};
  // RapidJSON takes a NUL byte for the end of the text and would ignore
  // whatever follows it; JSON allows none outside strings (and inside
  // them only escaped).
  if (auto nul = text.find('\0'); nul != std::string_view::npos)
    return parse_error{"NUL byte at offset " + std::to_string(nul), nul};
  if (auto at = find_too_deep(text, limits.max_depth))
    return parse_error{"nesting exceeds the depth limit of "
                         + std::to_string(limits.max_depth) + " at offset "
                         + std::to_string(*at),
                       *at};
  // RapidJSON's validation reads every character through its transcoder,
  // about a fifth of the parse; checking the whole text a word at a time
  // is much cheaper. Only text that fails it takes RapidJSON's validating
  // parse, which says where. (Outside strings a non-ASCII byte is a syntax
  // error either way.)
  constexpr unsigned flags = rapidjson::kParseIterativeFlag;
  if (is_ascii(text) || is_utf8(text))
    doc.Parse<flags>(text.data(), text.size());
  else
    doc.Parse<flags | rapidjson::kParseValidateEncodingFlag>(text.data(),
                                                             text.size());
  if (!doc.HasParseError()) {
    // Only a \u escape can produce a lone surrogate (raw bytes were
    // validated above, or are ASCII).
    if (text.find("\\u") != std::string_view::npos && !strings_are_utf8(doc))
      return parse_error{"a \\u escape encodes a lone UTF-16 surrogate", 0};
    return std::nullopt;
  }
  auto offset = doc.GetErrorOffset();
  return parse_error{std::string{"parse error at offset "}
                       + std::to_string(offset) + ": "
                       + rapidjson::GetParseError_En(doc.GetParseError()),
                     offset};
}

namespace {

constexpr size_t scratch_bytes = 16 * 1024;
/// Chunks beyond the scratch buffer, as RapidJSON takes by default.
constexpr size_t heap_chunk_bytes = 64 * 1024;

struct scratch_buffer {
  alignas(std::max_align_t) char bytes[scratch_bytes] = {};
  bool in_use = false;
};

scratch_buffer& thread_scratch() {
  thread_local scratch_buffer buffer;
  return buffer;
}

/// Stateless, so one serves every allocator (RapidJSON would otherwise
/// allocate one per pool).
rapidjson::CrtAllocator crt_allocator;

bool claim_scratch() {
  auto& b = thread_scratch();
  if (b.in_use)
    return false;
  b.in_use = true;
  return true;
}

} // namespace

scratch_document::scratch_document()
  : owns_buffer_{claim_scratch()},
    fallback_{owns_buffer_ ? nullptr : std::make_unique<char[]>(scratch_bytes)},
    alloc_{owns_buffer_ ? thread_scratch().bytes : fallback_.get(),
           scratch_bytes, heap_chunk_bytes, &crt_allocator},
    doc_{&alloc_} {}

scratch_document::~scratch_document() {
  if (owns_buffer_)
    thread_scratch().in_use = false;
}

std::string to_string(const rapidjson::Value& v) {
  rapidjson::StringBuffer buf;
  rapidjson::Writer<rapidjson::StringBuffer> writer{buf};
  v.Accept(writer);
  return std::string{buf.GetString(), buf.GetSize()};
}

std::string quote(std::string_view s) {
  static constexpr char hex[] = "0123456789abcdef";
  std::string out;
  out.reserve(s.size() + 2);
  out += '"';
  for (size_t i = 0; i < s.size();) {
    auto c = static_cast<unsigned char>(s[i]);
    switch (c) {
      case '"':
        out += "\\\"";
        ++i;
        continue;
      case '\\':
        out += "\\\\";
        ++i;
        continue;
      case '\b':
        out += "\\b";
        ++i;
        continue;
      case '\f':
        out += "\\f";
        ++i;
        continue;
      case '\n':
        out += "\\n";
        ++i;
        continue;
      case '\r':
        out += "\\r";
        ++i;
        continue;
      case '\t':
        out += "\\t";
        ++i;
        continue;
      default: break;
    }
    if (c < 0x20) {
      out += "\\u00";
      out += hex[c >> 4];
      out += hex[c & 0xF];
      ++i;
      continue;
    }
    auto n = utf8_sequence_length(s, i);
    if (n == 0) {
      out += "\xEF\xBF\xBD"; // U+FFFD REPLACEMENT CHARACTER
      ++i;
      continue;
    }
    out.append(s.data() + i, n);
    i += n;
  }
  out += '"';
  return out;
}

} // namespace butlers::json
