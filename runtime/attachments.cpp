#include "runtime/attachments.hpp"

#include <openssl/evp.h>

#include "runtime/dedupe.hpp"
#include "runtime/json.hpp"

namespace butlers {

namespace {

std::string string_member(const rapidjson::Value& v, const char* name) {
  auto m = v.FindMember(name);
  if (m == v.MemberEnd() || !m->value.IsString())
    return {};
  return {m->value.GetString(), m->value.GetStringLength()};
}

std::string size_text(uint64_t n) {
  if (n >= 1024 * 1024)
    return std::to_string(n / (1024 * 1024)) + " MB";
  if (n >= 1024)
    return std::to_string(n / 1024) + " KB";
  return std::to_string(n) + " bytes";
}

std::string data_url(const attachment_data& x) {
  return "data:" + x.ref.media_type + ";base64," + x.base64;
}

} // namespace

std::string attachments_json(const std::vector<attachment_ref>& xs) {
  std::string out = "[";
  for (auto& x : xs) {
    if (out.size() > 1)
      out += ',';
    out += R"({"sha256":)" + json::quote(x.sha256) + R"(,"media_type":)"
           + json::quote(x.media_type) + R"(,"size":)" + std::to_string(x.size)
           + R"(,"name":)" + json::quote(x.name) + "}";
  }
  out += ']';
  return out;
}

std::vector<attachment_ref> parse_attachments(const rapidjson::Value& v) {
  std::vector<attachment_ref> out;
  if (!v.IsArray())
    return out;
  for (auto& e : v.GetArray()) {
    if (!e.IsObject())
      continue;
    attachment_ref x;
    x.sha256 = string_member(e, "sha256");
    x.media_type = string_member(e, "media_type");
    x.name = string_member(e, "name");
    auto s = e.FindMember("size");
    if (s != e.MemberEnd() && s->value.IsUint64())
      x.size = s->value.GetUint64();
    if (x.sha256.size() != 64 || x.media_type.empty())
      continue;
    out.push_back(std::move(x));
  }
  return out;
}

std::vector<attachment_ref> parse_attachments(std::string_view json_text) {
  if (json_text.empty())
    return {};
  rapidjson::Document doc;
  json::parse_limits limits;
  limits.max_bytes = json_text.size();
  if (json::parse(json_text, doc, limits))
    return {};
  return parse_attachments(doc);
}

std::string attachments_of_payload(std::string_view envelope) {
  if (envelope.empty())
    return {};
  rapidjson::Document doc;
  json::parse_limits limits;
  limits.max_bytes = envelope.size();
  if (json::parse(envelope, doc, limits) || !doc.IsObject())
    return {};
  auto p = doc.FindMember("payload");
  if (p == doc.MemberEnd() || !p->value.IsObject())
    return {};
  auto a = p->value.FindMember("attachments");
  if (a == p->value.MemberEnd())
    return {};
  auto xs = parse_attachments(a->value);
  return xs.empty() ? std::string{} : attachments_json(xs);
}

std::vector<attachment_ref> attachment_refs(
  const std::vector<attachment_data>& xs) {
  std::vector<attachment_ref> out;
  out.reserve(xs.size());
  for (auto& x : xs)
    out.push_back(x.ref);
  return out;
}

std::string attachment_hash(std::string_view bytes) {
  return sha256_hex(bytes);
}

std::string base64_encode(std::string_view bytes) {
  std::string out;
  out.resize(4 * ((bytes.size() + 2) / 3) + 1);
  auto n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                           reinterpret_cast<const unsigned char*>(bytes.data()),
                           static_cast<int>(bytes.size()));
  out.resize(static_cast<size_t>(n));
  return out;
}

std::optional<std::string> base64_decode(std::string_view text) {
  std::string clean;
  clean.reserve(text.size());
  for (char c : text)
    if (c != '\n' && c != '\r' && c != ' ' && c != '\t')
      clean += c;
  if (clean.size() % 4 != 0)
    return std::nullopt;
  std::string out;
  out.resize(clean.size() / 4 * 3 + 1);
  auto n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                           reinterpret_cast<const unsigned char*>(clean.data()),
                           static_cast<int>(clean.size()));
  if (n < 0)
    return std::nullopt;
  // EVP_DecodeBlock counts the padding's bytes as zeros.
  size_t len = static_cast<size_t>(n);
  if (!clean.empty() && clean.back() == '=')
    --len;
  if (clean.size() > 1 && clean[clean.size() - 2] == '=')
    --len;
  out.resize(len);
  return out;
}

std::string over_cap(const std::vector<attachment_ref>& xs,
                     const attachment_limits& limits) {
  if (xs.size() > limits.max_count)
    return std::to_string(xs.size()) + " attachments; at most "
           + std::to_string(limits.max_count) + " are taken per message";
  uint64_t sum = 0;
  for (auto& x : xs) {
    if (x.size > limits.max_bytes)
      return "'" + (x.name.empty() ? x.media_type : x.name) + "' is "
             + size_text(x.size) + "; the limit is "
             + size_text(limits.max_bytes) + " per attachment";
    sum += x.size;
  }
  if (sum > limits.max_message_bytes)
    return "the attachments add up to " + size_text(sum) + "; the limit is "
           + size_text(limits.max_message_bytes) + " per message";
  return {};
}

turn_files_error parse_turn_attachments(const rapidjson::Value& body,
                                        const attachment_limits& caps,
                                        std::vector<turn_file>& out,
                                        std::string& message) {
  auto invalid = [&](std::string why) {
    message = std::move(why);
    out.clear();
    return turn_files_error::invalid;
  };
  if (!body.IsObject())
    return turn_files_error::none;
  auto a = body.FindMember("attachments");
  if (a == body.MemberEnd())
    return turn_files_error::none;
  if (!a->value.IsArray())
    return invalid("field 'attachments' must be an array of {name, "
                   "media_type, data}");
  if (a->value.Size() > max_attachments_per_message)
    return invalid("field 'attachments' has more than "
                   + std::to_string(max_attachments_per_message) + " entries");
  size_t i = 0;
  for (auto& e : a->value.GetArray()) {
    auto field = "field 'attachments[" + std::to_string(i++) + "]";
    if (!e.IsObject())
      return invalid(field + "' must be an object {name, media_type, data}");
    for (auto& m : e.GetObject()) {
      std::string_view key{m.name.GetString(), m.name.GetStringLength()};
      if (key != "name" && key != "media_type" && key != "data")
        return invalid(field + "." + std::string{key} + "' is unknown");
      if (!m.value.IsString())
        return invalid(field + "." + std::string{key} + "' must be a string");
    }
    turn_file f;
    f.ref.name = string_member(e, "name");
    f.ref.media_type = string_member(e, "media_type");
    auto slash = f.ref.media_type.find('/');
    if (slash == std::string::npos || slash == 0
        || slash + 1 == f.ref.media_type.size() || f.ref.media_type.size() > 255
        || f.ref.media_type.find_first_of(" \t\r\n\";,") != std::string::npos)
      return invalid(field
                     + ".media_type' must be a MIME type such as "
                       "image/jpeg");
    if (f.ref.name.size() > 255)
      return invalid(field + ".name' is longer than 255 bytes");
    auto data = e.FindMember("data");
    if (data == e.MemberEnd())
      return invalid(field + ".data' is required (the bytes in base64)");
    auto bytes = base64_decode(
      {data->value.GetString(), data->value.GetStringLength()});
    if (!bytes)
      return invalid(field + ".data' is not standard base64");
    f.ref.size = bytes->size();
    f.bytes = std::move(*bytes);
    out.push_back(std::move(f));
  }
  std::vector<attachment_ref> refs;
  refs.reserve(out.size());
  for (auto& f : out)
    refs.push_back(f.ref);
  if (auto why = over_cap(refs, caps); !why.empty()) {
    message = std::move(why);
    out.clear();
    return turn_files_error::over_cap;
  }
  for (auto& f : out)
    f.ref.sha256 = attachment_hash(f.bytes);
  return turn_files_error::none;
}

attachment_block_kind block_kind_of(std::string_view t) {
  if (t == "image/jpeg" || t == "image/png" || t == "image/gif"
      || t == "image/webp")
    return attachment_block_kind::image;
  if (t == "application/pdf")
    return attachment_block_kind::document;
  return attachment_block_kind::note;
}

std::string attachment_note(const attachment_ref& x) {
  return "[attachment: " + (x.name.empty() ? std::string{"(no name)"} : x.name)
         + ", " + x.media_type + ", " + std::to_string(x.size)
         + " bytes; not passed to this model]";
}

std::string attachment_notes(std::string_view refs_json) {
  std::string out;
  for (auto& x : parse_attachments(refs_json))
    out += "\n" + attachment_note(x);
  return out;
}

std::string anthropic_content(std::string_view text,
                              const std::vector<attachment_data>& xs) {
  std::string out = R"([{"type":"text","text":)" + json::quote(text) + "}";
  for (auto& x : xs) {
    auto kind = block_kind_of(x.ref.media_type);
    if (kind == attachment_block_kind::note) {
      out += R"(,{"type":"text","text":)" + json::quote(attachment_note(x.ref))
             + "}";
      continue;
    }
    out += kind == attachment_block_kind::image ? R"(,{"type":"image")"
                                                : R"(,{"type":"document")";
    out += R"(,"source":{"type":"base64","media_type":)"
           + json::quote(x.ref.media_type) + R"(,"data":")" + x.base64 + "\"}}";
  }
  out += ']';
  return out;
}

std::string openai_content(std::string_view text,
                           const std::vector<attachment_data>& xs) {
  std::string out = R"([{"type":"text","text":)" + json::quote(text) + "}";
  for (auto& x : xs) {
    switch (block_kind_of(x.ref.media_type)) {
      case attachment_block_kind::image:
        out += R"(,{"type":"image_url","image_url":{"url":")" + data_url(x)
               + "\"}}";
        break;
      case attachment_block_kind::document:
        out += R"(,{"type":"file","file":{"filename":)"
               + json::quote(x.ref.name.empty() ? "document.pdf" : x.ref.name)
               + R"(,"file_data":")" + data_url(x) + "\"}}";
        break;
      case attachment_block_kind::note:
        out += R"(,{"type":"text","text":)"
               + json::quote(attachment_note(x.ref)) + "}";
        break;
    }
  }
  out += ']';
  return out;
}

std::string attachment_file_list(const std::vector<attachment_ref>& xs,
                                 const std::vector<std::string>& paths) {
  if (xs.empty())
    return {};
  std::string out = "\nAttachments the user sent (files, data; read them "
                    "from these paths):\n";
  for (size_t i = 0; i < xs.size() && i < paths.size(); ++i)
    out += "- " + paths[i] + " (" + xs[i].media_type + ", "
           + std::to_string(xs[i].size) + " bytes"
           + (xs[i].name.empty() ? std::string{}
                                 : ", named " + json::quote(xs[i].name))
           + ")\n";
  return out;
}

std::string attachment_file_name(size_t index, const attachment_ref& x) {
  std::string base = x.name.empty() ? "attachment" : x.name;
  std::string clean;
  for (char c : base) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
              || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
    clean += ok ? c : '_';
    if (clean.size() >= 100)
      break;
  }
  if (clean.empty() || clean[0] == '.')
    clean = "_" + clean;
  return std::to_string(index + 1) + "-" + clean;
}

} // namespace butlers
