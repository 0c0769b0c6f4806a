#include "runtime/schema.hpp"

#include "runtime/embedded.hpp"
#include "runtime/json.hpp"

// GCC 12 reports a false -Wmaybe-uninitialized inside libstdc++'s regex
// compiler (std::function in regex_automaton.h) when building with
// -fsanitize=address and optimization; with -Werror that would break the
// BUTLERS_SANITIZE build.
#if defined(__GNUC__) && !defined(__clang__)
#  pragma GCC diagnostic push
#  pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <regex>
#if defined(__GNUC__) && !defined(__clang__)
#  pragma GCC diagnostic pop
#endif

#include <cmath>
#include <cstdint>
#include <map>
#include <optional>
#include <stdexcept>
#include <unordered_map>

namespace butlers {

namespace {

/// Longest `maxLength` a `pattern` may sit beside. libstdc++'s std::regex
/// recurses once per matched character; a 64 KiB string overflows an 8 MiB
/// stack, 256 code points (at most 1 KiB) stays far from any thread's limit.
constexpr size_t max_pattern_length = 256;

/// Bound on the branch details embedded in anyOf/oneOf messages.
constexpr size_t max_detail_length = 480;

constexpr std::string_view draft04_uri = "http://json-schema.org/draft-04/"
                                         "schema";

// -- instance types ----------------------------------------------------------

enum type_bit : uint8_t {
  null_bit = 1,
  boolean_bit = 2,
  object_bit = 4,
  array_bit = 8,
  number_bit = 16,
  integer_bit = 32,
  string_bit = 64,
};

struct type_entry {
  std::string_view name;
  uint8_t bit;
};

constexpr type_entry type_table[] = {
  {"null", null_bit},     {"boolean", boolean_bit}, {"object", object_bit},
  {"array", array_bit},   {"number", number_bit},   {"integer", integer_bit},
  {"string", string_bit},
};

/// Draft-04 sees an integer as a number without fraction or exponent, which
/// is exactly what RapidJSON stores as an integer.
uint8_t type_of(const rapidjson::Value& v) {
  if (v.IsNull())
    return null_bit;
  if (v.IsBool())
    return boolean_bit;
  if (v.IsObject())
    return object_bit;
  if (v.IsArray())
    return array_bit;
  if (v.IsString())
    return string_bit;
  if (v.IsInt64() || v.IsUint64())
    return integer_bit;
  return number_bit;
}

std::string type_names(uint8_t mask) {
  std::string out;
  for (auto& entry : type_table)
    if (mask & entry.bit) {
      if (!out.empty())
        out += " or ";
      out += entry.name;
    }
  return out;
}

// -- string helpers ----------------------------------------------------------

/// Escapes one reference token of a JSON pointer (RFC 6901).
std::string escape_token(std::string_view token) {
  std::string out;
  out.reserve(token.size());
  for (char c : token) {
    if (c == '~')
      out += "~0";
    else if (c == '/')
      out += "~1";
    else
      out += c;
  }
  return out;
}

std::string truncated(std::string s, size_t max) {
  if (s.size() > max) {
    s.resize(max);
    s += "...";
  }
  return s;
}

std::string_view view(const rapidjson::Value& v) {
  return {v.GetString(), v.GetStringLength()};
}

std::string format_number(double x) {
  if (std::floor(x) == x && std::fabs(x) < 1e15)
    return std::to_string(static_cast<long long>(x));
  return std::to_string(x);
}

} // namespace

std::string to_string(const violation& x) {
  return "#" + x.pointer + " " + x.keyword + ": " + x.message;
}

// -- compiled form -----------------------------------------------------------

/// One (sub)schema, with every keyword already checked and converted.
struct schema::node {
  /// Location in the schema document, as a URI fragment ("#/properties/a").
  std::string path;
  /// Allowed instance types; 0 allows all.
  uint8_t types = 0;
  /// The `enum` array inside the schema document, if any.
  const rapidjson::Value* enum_values = nullptr;
  std::vector<std::string> required;
  std::map<std::string, const node*, std::less<>> properties;
  struct pattern_property {
    std::string source;
    std::regex regex;
    const node* schema;
  };
  std::vector<pattern_property> pattern_properties;
  /// False for `additionalProperties: false`.
  bool additional_allowed = true;
  /// The `additionalProperties` schema, if one was given.
  const node* additional = nullptr;
  const node* items = nullptr;
  std::optional<size_t> min_items;
  std::optional<size_t> max_items;
  std::optional<size_t> min_length;
  std::optional<size_t> max_length;
  std::string pattern_source;
  std::optional<std::regex> pattern;
  std::optional<double> minimum;
  std::optional<double> maximum;
  bool exclusive_minimum = false;
  bool exclusive_maximum = false;
  std::vector<const node*> all_of;
  std::vector<const node*> any_of;
  std::vector<const node*> one_of;
  const node* negated = nullptr;
  /// A `$ref` node has no other constraints; `ref_target` is set after the
  /// whole document has been compiled.
  std::string ref;
  const node* ref_target = nullptr;
};

// -- compiler ----------------------------------------------------------------

/// Turns the schema document into nodes, rejecting anything it would not
/// enforce exactly.
class schema::compiler {
 public:
  explicit compiler(schema& target) : schema_(target) {}

  void run() {
    const auto& root = *schema_.doc_;
    if (!root.IsObject())
      fail("#", "a schema must be a JSON object");
    compile(root, "#");
    resolve_refs();
    reject_cycles();
  }

 private:
  [[noreturn]] void fail(const std::string& path, const std::string& what) {
    throw std::logic_error("schema '" + schema_.name_ + "' at " + path + ": "
                           + what);
  }

  size_t to_size(const rapidjson::Value& x, const std::string& path,
                 std::string_view key) {
    if (!x.IsUint64())
      fail(path, std::string{key} + " must be a non-negative integer");
    return static_cast<size_t>(x.GetUint64());
  }

  double to_number(const rapidjson::Value& x, const std::string& path,
                   std::string_view key) {
    if (!x.IsNumber())
      fail(path, std::string{key} + " must be a number");
    return x.GetDouble();
  }

  std::regex to_regex(const rapidjson::Value& x, const std::string& path) {
    try {
      return std::regex{x.GetString(), x.GetStringLength(),
                        std::regex::ECMAScript};
    } catch (const std::regex_error& e) {
      fail(path, "invalid regex '" + std::string{view(x)} + "': " + e.what());
    }
  }

  std::vector<const node*> compile_list(const rapidjson::Value& x,
                                        const std::string& path,
                                        std::string_view key) {
    if (!x.IsArray() || x.Empty())
      fail(path, std::string{key} + " must be a non-empty array of schemas");
    std::vector<const node*> result;
    for (rapidjson::SizeType i = 0; i < x.Size(); ++i)
      result.push_back(compile(x[i], path + "/" + std::to_string(i)));
    return result;
  }

  uint8_t to_type_bit(const rapidjson::Value& x, const std::string& path) {
    if (x.IsString())
      for (auto& entry : type_table)
        if (entry.name == view(x))
          return entry.bit;
    fail(path, "unknown type in 'type'");
  }

  node* compile(const rapidjson::Value& v, const std::string& path) {
    if (!v.IsObject())
      fail(path, "a schema must be a JSON object");
    schema_.nodes_.push_back(std::make_unique<node>());
    node* n = schema_.nodes_.back().get();
    n->path = path;
    by_path_.emplace(path, n);
    std::string constraint; // a keyword that a $ref beside it would hide
    for (auto& member : v.GetObject()) {
      auto key = view(member.name);
      const auto& x = member.value;
      auto at = path + "/" + escape_token(key);
      if (compile_annotation(*n, key, x, at))
        continue;
      if (!compile_structure(*n, key, x, at) && !compile_bound(*n, key, x, at)
          && !compile_combinator(*n, key, x, at))
        fail(path, "unknown or unsupported keyword '" + std::string{key} + "'");
      if (constraint.empty())
        constraint = std::string{key};
    }
    check_node(*n, constraint);
    return n;
  }

  /// Keywords that constrain nothing themselves (a $ref may stand beside
  /// them); false when `key` is none of them.
  bool compile_annotation(node& n, std::string_view key,
                          const rapidjson::Value& x, const std::string& at) {
    if (key == "$schema") {
      if (!x.IsString())
        fail(at, "$schema must be a string");
      auto uri = view(x);
      if (uri.substr(0, draft04_uri.size()) != draft04_uri
          || uri.size() > draft04_uri.size() + 1)
        fail(at, "only draft-04 is supported, not " + std::string{uri});
    } else if (key == "id" || key == "title" || key == "description"
               || key == "format") {
      if (!x.IsString())
        fail(at, std::string{key} + " must be a string");
    } else if (key == "default") {
      // an annotation: nothing to check
    } else if (key == "definitions") {
      if (!x.IsObject())
        fail(at, "definitions must be an object");
      for (auto& def : x.GetObject())
        compile(def.value, at + "/" + escape_token(view(def.name)));
    } else if (key == "$ref") {
      if (!x.IsString() || view(x).substr(0, 14) != "#/definitions/")
        fail(at, "$ref must point into '#/definitions/'");
      n.ref = std::string{view(x)};
    } else {
      return false;
    }
    return true;
  }

  /// Keywords about the instance's type, values and object members; false
  /// when `key` is none of them.
  bool compile_structure(node& n, std::string_view key,
                         const rapidjson::Value& x, const std::string& at) {
    if (key == "type") {
      if (x.IsArray()) {
        if (x.Empty())
          fail(at, "type must not be empty");
        for (auto& t : x.GetArray())
          n.types |= to_type_bit(t, at);
      } else {
        n.types = to_type_bit(x, at);
      }
    } else if (key == "enum") {
      if (!x.IsArray() || x.Empty())
        fail(at, "enum must be a non-empty array");
      n.enum_values = &x;
    } else if (key == "required") {
      if (!x.IsArray() || x.Empty())
        fail(at, "required must be a non-empty array of strings");
      for (auto& name : x.GetArray()) {
        if (!name.IsString())
          fail(at, "required must be a non-empty array of strings");
        n.required.emplace_back(view(name));
      }
    } else if (key == "properties") {
      if (!x.IsObject())
        fail(at, "properties must be an object");
      for (auto& prop : x.GetObject()) {
        auto name = view(prop.name);
        n.properties.emplace(std::string{name},
                             compile(prop.value,
                                     at + "/" + escape_token(name)));
      }
    } else if (key == "patternProperties") {
      if (!x.IsObject())
        fail(at, "patternProperties must be an object");
      for (auto& prop : x.GetObject()) {
        auto sub_path = at + "/" + escape_token(view(prop.name));
        auto regex = to_regex(prop.name, sub_path);
        n.pattern_properties.push_back({std::string{view(prop.name)},
                                        std::move(regex),
                                        compile(prop.value, sub_path)});
      }
    } else if (key == "additionalProperties") {
      if (x.IsBool())
        n.additional_allowed = x.GetBool();
      else
        n.additional = compile(x, at);
    } else {
      return false;
    }
    return true;
  }

  /// Keywords that bound an array, a string or a number; false when `key`
  /// is none of them.
  bool compile_bound(node& n, std::string_view key, const rapidjson::Value& x,
                     const std::string& at) {
    if (key == "items") {
      if (!x.IsObject())
        fail(at, "items must be a single schema (tuple form unsupported)");
      n.items = compile(x, at);
    } else if (key == "minItems") {
      n.min_items = to_size(x, at, key);
    } else if (key == "maxItems") {
      n.max_items = to_size(x, at, key);
    } else if (key == "minLength") {
      n.min_length = to_size(x, at, key);
    } else if (key == "maxLength") {
      n.max_length = to_size(x, at, key);
    } else if (key == "pattern") {
      if (!x.IsString())
        fail(at, "pattern must be a string");
      n.pattern_source = std::string{view(x)};
      n.pattern = to_regex(x, at);
    } else if (key == "minimum") {
      n.minimum = to_number(x, at, key);
    } else if (key == "maximum") {
      n.maximum = to_number(x, at, key);
    } else if (key == "exclusiveMinimum" || key == "exclusiveMaximum") {
      if (!x.IsBool())
        fail(at, std::string{key} + " must be a boolean (draft-04)");
      (key == "exclusiveMinimum" ? n.exclusive_minimum : n.exclusive_maximum)
        = x.GetBool();
    } else {
      return false;
    }
    return true;
  }

  /// Keywords that combine subschemas; false when `key` is none of them.
  bool compile_combinator(node& n, std::string_view key,
                          const rapidjson::Value& x, const std::string& at) {
    if (key == "allOf")
      n.all_of = compile_list(x, at, key);
    else if (key == "anyOf")
      n.any_of = compile_list(x, at, key);
    else if (key == "oneOf")
      n.one_of = compile_list(x, at, key);
    else if (key == "not")
      n.negated = compile(x, at);
    else
      return false;
    return true;
  }

  /// Rejects keyword combinations that would not be enforced as written;
  /// `constraint` is the first constraining keyword of `n`, if any.
  void check_node(const node& n, const std::string& constraint) {
    const auto& path = n.path;
    if (!n.ref.empty() && !constraint.empty())
      fail(path, "'" + constraint + "' beside $ref would be ignored");
    if (n.exclusive_minimum && !n.minimum)
      fail(path, "exclusiveMinimum needs minimum");
    if (n.exclusive_maximum && !n.maximum)
      fail(path, "exclusiveMaximum needs maximum");
    if (n.pattern && (!n.max_length || *n.max_length > max_pattern_length))
      fail(path, "pattern needs a maxLength of at most "
                   + std::to_string(max_pattern_length) + " beside it");
  }

  void resolve_refs() {
    for (auto& n : schema_.nodes_) {
      if (n->ref.empty())
        continue;
      auto i = by_path_.find(n->ref);
      if (i == by_path_.end())
        fail(n->path, "unresolved $ref '" + n->ref + "'");
      n->ref_target = i->second;
    }
  }

  /// Rejects schemas that would recurse forever on one instance value,
  /// e.g. a definition that refers to itself through allOf.
  void reject_cycles() {
    std::unordered_map<const node*, int> state; // 1 = on stack, 2 = done
    auto visit = [&](const node* n, auto& self) -> void {
      auto& s = state[n];
      if (s == 2)
        return;
      if (s == 1)
        fail(n->path, "$ref cycle that never descends into the instance");
      s = 1;
      std::vector<const node*> next = n->all_of;
      next.insert(next.end(), n->any_of.begin(), n->any_of.end());
      next.insert(next.end(), n->one_of.begin(), n->one_of.end());
      if (n->negated)
        next.push_back(n->negated);
      if (n->ref_target)
        next.push_back(n->ref_target);
      for (auto* m : next)
        self(m, self);
      state[n] = 2;
    };
    for (auto& n : schema_.nodes_)
      visit(n.get(), visit);
  }

  schema& schema_;
  std::unordered_map<std::string, node*> by_path_;
};

// -- checker -----------------------------------------------------------------

/// Walks an instance alongside the nodes, collecting violations.
class schema::checker {
 public:
  checker(std::vector<violation>& out, std::string pointer)
    : out_(out), pointer_(std::move(pointer)) {}

  void check(const node& n, const rapidjson::Value& v) {
    if (n.ref_target) {
      check(*n.ref_target, v);
      return;
    }
    auto actual = type_of(v);
    if (n.types != 0) {
      auto ok = (n.types & actual)
                || (actual == integer_bit && (n.types & number_bit));
      if (!ok) {
        // Nothing else can be judged usefully against the wrong type.
        report("type", "expected " + type_names(n.types) + ", found "
                         + type_names(actual));
        return;
      }
    }
    if (n.enum_values) {
      bool found = false;
      for (auto& candidate : n.enum_values->GetArray())
        if (candidate == v) {
          found = true;
          break;
        }
      if (!found)
        report("enum", truncated(json::to_string(v), 64) + " is not one of "
                         + truncated(json::to_string(*n.enum_values), 200));
    }
    switch (actual) {
      case object_bit: check_object(n, v); break;
      case array_bit: check_array(n, v); break;
      case string_bit: check_string(n, v); break;
      case integer_bit:
      case number_bit: check_number(n, v); break;
      default: break;
    }
    check_combinators(n, v);
  }

 private:
  void report(std::string keyword, std::string message) {
    out_.push_back({pointer_, std::move(keyword), std::move(message)});
  }

  /// Runs `n` against `v` at the current pointer, into a separate list.
  std::vector<violation> try_branch(const node& n, const rapidjson::Value& v) {
    std::vector<violation> result;
    checker{result, pointer_}.check(n, v);
    return result;
  }

  void descend(std::string_view token, const node& n,
               const rapidjson::Value& v) {
    auto size = pointer_.size();
    pointer_ += '/';
    pointer_ += escape_token(token);
    check(n, v);
    pointer_.resize(size);
  }

  void check_object(const node& n, const rapidjson::Value& v) {
    for (auto& name : n.required)
      if (!v.HasMember(name))
        report("required", "missing required property '" + name + "'");
    for (auto& member : v.GetObject()) {
      auto name = view(member.name);
      bool matched = false;
      if (auto i = n.properties.find(name); i != n.properties.end()) {
        matched = true;
        descend(name, *i->second, member.value);
      }
      // Long names are never matched: std::regex recursion (see above).
      if (name.size() <= max_pattern_length)
        for (auto& pp : n.pattern_properties)
          if (std::regex_search(name.begin(), name.end(), pp.regex)) {
            matched = true;
            descend(name, *pp.schema, member.value);
          }
      if (matched)
        continue;
      if (n.additional) {
        descend(name, *n.additional, member.value);
      } else if (!n.additional_allowed) {
        auto size = pointer_.size();
        pointer_ += '/';
        pointer_ += escape_token(name);
        report("additionalProperties", "property '"
                                         + truncated(std::string{name}, 64)
                                         + "' is not allowed");
        pointer_.resize(size);
      }
    }
  }

  void check_array(const node& n, const rapidjson::Value& v) {
    size_t size = v.Size();
    if (n.min_items && size < *n.min_items)
      report("minItems", "array has " + std::to_string(size)
                           + " items, fewer than the minimum of "
                           + std::to_string(*n.min_items));
    if (n.max_items && size > *n.max_items)
      report("maxItems", "array has " + std::to_string(size)
                           + " items, more than the maximum of "
                           + std::to_string(*n.max_items));
    if (n.items)
      for (rapidjson::SizeType i = 0; i < v.Size(); ++i)
        descend(std::to_string(i), *n.items, v[i]);
  }

  void check_string(const node& n, const rapidjson::Value& v) {
    auto text = view(v);
    if (!n.min_length && !n.max_length && !n.pattern)
      return;
    auto length = json::code_points(text);
    if (n.min_length && length < *n.min_length)
      report("minLength", "string has " + std::to_string(length)
                            + " characters, fewer than the minimum of "
                            + std::to_string(*n.min_length));
    if (n.max_length && length > *n.max_length) {
      report("maxLength", "string has " + std::to_string(length)
                            + " characters, more than the maximum of "
                            + std::to_string(*n.max_length));
      return; // too long to hand to std::regex safely
    }
    if (n.pattern && !std::regex_search(text.begin(), text.end(), *n.pattern))
      report("pattern", "string does not match " + n.pattern_source);
  }

  void check_number(const node& n, const rapidjson::Value& v) {
    auto x = v.GetDouble();
    if (n.minimum) {
      auto low = *n.minimum;
      if (n.exclusive_minimum ? !(x > low) : !(x >= low))
        report("minimum", "must be "
                            + std::string{n.exclusive_minimum ? ">" : ">="}
                            + " " + format_number(low));
    }
    if (n.maximum) {
      auto high = *n.maximum;
      if (n.exclusive_maximum ? !(x < high) : !(x <= high))
        report("maximum", "must be "
                            + std::string{n.exclusive_maximum ? "<" : "<="}
                            + " " + format_number(high));
    }
  }

  /// Summarizes the violations of failed alternatives for one message.
  static std::string describe(const std::vector<std::vector<violation>>& all) {
    std::string out;
    for (size_t i = 0; i < all.size(); ++i) {
      if (all[i].empty())
        continue;
      out += out.empty() ? "" : "; ";
      out += "#" + std::to_string(i) + ": ";
      for (size_t j = 0; j < all[i].size(); ++j) {
        if (j > 0)
          out += ", ";
        out += to_string(all[i][j]);
      }
    }
    return truncated(std::move(out), max_detail_length);
  }

  void check_combinators(const node& n, const rapidjson::Value& v) {
    for (auto* sub : n.all_of)
      check(*sub, v);
    if (!n.any_of.empty()) {
      std::vector<std::vector<violation>> branches;
      bool ok = false;
      for (auto* sub : n.any_of) {
        branches.push_back(try_branch(*sub, v));
        if (branches.back().empty()) {
          ok = true;
          break;
        }
      }
      if (!ok)
        report("anyOf", "matches none of the " + std::to_string(n.any_of.size())
                          + " alternatives (" + describe(branches) + ")");
    }
    if (!n.one_of.empty()) {
      std::vector<std::vector<violation>> branches;
      size_t passed = 0;
      for (auto* sub : n.one_of) {
        branches.push_back(try_branch(*sub, v));
        if (branches.back().empty())
          ++passed;
      }
      if (passed == 0)
        report("oneOf", "matches none of the " + std::to_string(n.one_of.size())
                          + " alternatives (" + describe(branches) + ")");
      else if (passed > 1)
        report("oneOf", "matches " + std::to_string(passed) + " of the "
                          + std::to_string(n.one_of.size())
                          + " alternatives, expected exactly one");
    }
    if (n.negated && try_branch(*n.negated, v).empty())
      report("not", "matches the schema at " + n.negated->path
                      + ", which it must not");
  }

  std::vector<violation>& out_;
  std::string pointer_;
};

// -- schema ------------------------------------------------------------------

schema::schema(std::string name)
  : name_(std::move(name)), doc_(std::make_unique<rapidjson::Document>()) {}

schema::schema(schema&&) noexcept = default;

schema& schema::operator=(schema&&) noexcept = default;

schema::~schema() = default;

schema schema::compile(std::string name, std::string_view text) {
  schema result{std::move(name)};
  if (auto err = json::parse(text, *result.doc_))
    throw std::logic_error("schema '" + result.name_
                           + "' is not valid JSON: " + err->message);
  compiler{result}.run();
  return result;
}

namespace {

constexpr std::string_view schema_prefix = "schemas/";
constexpr std::string_view schema_suffix = ".json";

/// All embedded schemas, compiled on first use. Compiling them together
/// means one broken schema fails every lookup, at startup, loudly.
const std::map<std::string, schema, std::less<>>& registry() {
  static const auto instance = [] {
    std::map<std::string, schema, std::less<>> result;
    for (auto& file : embedded_files()) {
      std::string_view path = file.path;
      if (path.size() <= schema_prefix.size() + schema_suffix.size()
          || path.substr(0, schema_prefix.size()) != schema_prefix
          || path.substr(path.size() - schema_suffix.size()) != schema_suffix)
        continue;
      std::string name{
        path.substr(schema_prefix.size(),
                    path.size() - schema_prefix.size() - schema_suffix.size())};
      auto compiled = schema::compile(name, file.content);
      result.emplace(std::move(name), std::move(compiled));
    }
    return result;
  }();
  return instance;
}

} // namespace

const schema& schema::get(std::string_view name) {
  auto& all = registry();
  if (auto i = all.find(name); i != all.end())
    return i->second;
  std::string known;
  for (auto& entry : all)
    known += (known.empty() ? "" : ", ") + entry.first;
  throw std::logic_error("no embedded schema 'schemas/" + std::string{name}
                         + ".json' (known: " + known + ")");
}

std::vector<std::string> schema::names() {
  std::vector<std::string> result;
  for (auto& entry : registry())
    result.push_back(entry.first);
  return result;
}

const std::string& schema::name() const {
  return name_;
}

std::vector<violation> schema::validate(
  const rapidjson::Value& instance) const {
  std::vector<violation> result;
  checker{result, ""}.check(*nodes_.front(), instance);
  return result;
}

} // namespace butlers
