#include "runtime/dedupe.hpp"

#include <stdexcept>

#include <openssl/evp.h>

#include "runtime/text.hpp"

namespace butlers {

namespace {

std::string_view strip_angles(std::string_view s) {
  s = trim(s);
  if (s.size() >= 2 && s.front() == '<' && s.back() == '>')
    s = trim(s.substr(1, s.size() - 2));
  return s;
}

void append_field(std::string& out, std::string_view field) {
  out += std::to_string(field.size());
  out += ':';
  out += field;
}

} // namespace

std::string normalize_whitespace(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  bool pending_space = false;
  for (char c : trim(text)) {
    if (is_ascii_space(c)) {
      pending_space = true;
      continue;
    }
    if (pending_space)
      out += ' ';
    pending_space = false;
    out += c;
  }
  return out;
}

std::string sha256_hex(std::string_view data) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (EVP_Digest(data.data(), data.size(), digest, &len, EVP_sha256(), nullptr)
      != 1)
    throw std::runtime_error("EVP_Digest(sha256) failed");
  static constexpr char digits[] = "0123456789abcdef";
  std::string out;
  out.reserve(len * 2);
  for (unsigned int i = 0; i < len; ++i) {
    out += digits[digest[i] >> 4];
    out += digits[digest[i] & 0x0F];
  }
  return out;
}

std::string dedupe_key(const dedupe_input& in, uint32_t window_s) {
  auto event_id = trim(in.external_event_id);
  if (in.channel == "telegram" && !event_id.empty()) {
    std::string key = "tg:";
    append_field(key, trim(in.endpoint_identity));
    key += ':';
    key += event_id;
    return key;
  }
  if (in.channel == "slack" && !event_id.empty()) {
    std::string key = "slack:";
    append_field(key, trim(in.endpoint_identity));
    key += ':';
    key += event_id;
    return key;
  }
  if (in.channel == "email" && !strip_angles(event_id).empty()) {
    std::string key = "email:";
    append_field(key, trim(in.endpoint_identity));
    key += ':';
    key += strip_angles(event_id);
    return key;
  }
  auto idem = trim(in.idempotency_key);
  if (!idem.empty()) {
    std::string key = "idem:";
    append_field(key, in.channel);
    key += ':';
    append_field(key, trim(in.endpoint_identity));
    key += ':';
    key += idem;
    return key;
  }
  auto bucket = window_s == 0
                  ? in.received_at_s
                  : in.received_at_s / static_cast<int64_t>(window_s);
  std::string preimage;
  append_field(preimage, in.channel);
  append_field(preimage, trim(in.endpoint_identity));
  append_field(preimage, trim(in.sender_identity));
  append_field(preimage, normalize_whitespace(in.normalized_text));
  append_field(preimage, std::to_string(bucket));
  return "hash:" + sha256_hex(preimage);
}

} // namespace butlers
