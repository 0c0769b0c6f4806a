#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/json.hpp"

namespace butlers {

/// One reason an instance does not match a schema. Validation returns all
/// of them, so a client fixes its envelope in one round trip.
struct violation {
  /// JSON pointer into the instance, e.g. "/source/channel" ("" is the root).
  std::string pointer;
  /// The failing keyword, e.g. "required".
  std::string keyword;
  /// Human-readable, names the missing property for "required".
  std::string message;
};

/// Renders a violation as `<pointer> <keyword>: <message>` (the root as
/// `/`), the form error replies and logs use.
std::string to_string(const violation& x);

/// A compiled JSON Schema (draft-04 subset) that reports every violation,
/// which RapidJSON 1.1's SchemaValidator cannot: it stops at the first.
///
/// Supported keywords: type, enum, required, properties,
/// additionalProperties, patternProperties, items (one schema), minItems,
/// maxItems, minLength, maxLength (in code points), pattern, minimum,
/// maximum, exclusiveMinimum, exclusiveMaximum, anyOf, oneOf, allOf, not,
/// $ref (to `#/definitions/...`), definitions, and the annotations $schema,
/// id, title, description, default and format (format is not enforced).
/// Any other keyword is a load-time error, so no schema can contain a rule
/// that is silently not enforced. A `pattern` needs a `maxLength` of at most
/// 256 beside it: std::regex recurses per character, and the bound keeps
/// untrusted strings from overflowing the stack.
class schema {
 public:
  /// Returns the embedded schema `schemas/<name>.json` (e.g. name
  /// "ingest.v1"); throws std::logic_error if missing or invalid. All
  /// embedded schemas are compiled together on first use (thread-safe
  /// static init) and are immutable afterwards, so references may be shared
  /// across threads for the life of the program.
  static const schema& get(std::string_view name);

  /// Names of all compiled-in schemas, sorted.
  static std::vector<std::string> names();

  /// Compiles schema `text`; `name` only labels errors. Throws
  /// std::logic_error on invalid JSON, an unknown keyword, a malformed
  /// keyword value, a bad regex or an unresolved $ref. `get` uses this; it
  /// is public so tests can feed schemas that are not embedded.
  static schema compile(std::string name, std::string_view text);

  schema(schema&&) noexcept;
  schema& operator=(schema&&) noexcept;
  ~schema();

  /// The name given at compile time, for error messages.
  const std::string& name() const;

  /// Validates `instance`, returning every violation (empty = valid).
  /// Thread-safe. Recursion follows the instance, so pass documents whose
  /// depth json::parse has bounded.
  std::vector<violation> validate(const rapidjson::Value& instance) const;

 private:
  struct node;
  class compiler;
  class checker;

  explicit schema(std::string name);

  /// For messages.
  std::string name_;
  /// The parsed schema text; `enum` values point into it.
  std::unique_ptr<rapidjson::Document> doc_;
  /// Every compiled (sub)schema; the first is the root.
  std::vector<std::unique_ptr<node>> nodes_;
};

} // namespace butlers
