#pragma once

// Every translation unit must see the same RapidJSON configuration, or the
// templates differ between them; the build defines this project-wide.
#if !defined(RAPIDJSON_HAS_STDSTRING) || !RAPIDJSON_HAS_STDSTRING
#  error "compile with -DRAPIDJSON_HAS_STDSTRING=1 (target butlers_rapidjson)"
#endif

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include <rapidjson/document.h>

namespace butlers::json {

/// Limits applied before and during parsing, so that untrusted input cannot
/// exhaust memory or stack.
struct parse_limits {
  /// Texts longer than this are rejected without being looked at.
  size_t max_bytes = 1 << 20;
  /// Arrays and objects nested deeper than this are rejected; no envelope
  /// of ours comes close, and every recursive consumer stays bounded.
  size_t max_depth = 64;
};

/// Why a text was not a JSON document.
struct parse_error {
  /// Human-readable reason, including the offset.
  std::string message;
  /// Byte offset into the text where the problem was found.
  size_t offset = 0;
};

/// Parses `text` into `doc`: strict JSON, valid UTF-8, nothing after the
/// root value. Size and nesting depth are checked before RapidJSON runs,
/// and RapidJSON parses iteratively, so hostile input cannot overflow the
/// stack. Returns `std::nullopt` on success; on failure `doc` is unspecified.
std::optional<parse_error> parse(std::string_view text,
                                 rapidjson::Document& doc,
                                 const parse_limits& limits = {});

/// A document for short-lived parses on a hot path (one per request). A
/// plain `rapidjson::Document` takes a fresh 64 KiB chunk from the heap for
/// its first value and frees it at the end; freeing a chunk that large also
/// makes glibc consolidate its small-chunk bins, which showed up as about a
/// tenth of the HTTP thread's CPU at saturation. This one keeps its first
/// 16 KiB in a buffer of the calling thread and takes heap chunks only for
/// larger documents. It lives in one scope; a second one made on the same
/// thread while the first lives (never the case today) takes its first
/// chunk from the heap instead of sharing the buffer.
class scratch_document {
 public:
  scratch_document();
  ~scratch_document();
  scratch_document(const scratch_document&) = delete;
  scratch_document& operator=(const scratch_document&) = delete;

  rapidjson::Document& doc() {
    return doc_;
  }

 private:
  bool owns_buffer_;
  std::unique_ptr<char[]> fallback_;
  rapidjson::MemoryPoolAllocator<> alloc_;
  rapidjson::Document doc_;
};

/// True when no byte of `text` has its high bit set.
bool is_ascii(std::string_view text);

/// True when `s` is well-formed UTF-8: no overlong forms, no surrogates,
/// nothing past U+10FFFF.
bool is_utf8(std::string_view s);

/// Counts the code points of UTF-8 text (the lead bytes), as draft-04's
/// minLength and maxLength do.
size_t code_points(std::string_view s);

/// Serializes a value compactly, for logs, storage and replies.
std::string to_string(const rapidjson::Value& v);

/// Escapes `s` as a JSON string literal including quotes, for building
/// small documents by hand. Control characters become `\uXXXX` (or the short
/// escapes), and invalid UTF-8 bytes become U+FFFD so the result always
/// parses.
std::string quote(std::string_view s);

} // namespace butlers::json
