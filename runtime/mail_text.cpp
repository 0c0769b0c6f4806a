// Text of mail bodies: charsets to UTF-8, HTML to text, and the cleaning
// that makes any of it fit an envelope (runtime/mail.hpp).

#include <iconv.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include <gmime/gmime.h>

#include "runtime/json.hpp"
#include "runtime/mail.hpp"
#include "runtime/text.hpp"

namespace butlers {

namespace {

constexpr std::string_view replacement = "\xEF\xBF\xBD"; // U+FFFD

void append_utf8(std::string& out, uint32_t cp) {
  if (cp == 0 || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
    out += replacement;
  } else if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

/// Length of the well-formed UTF-8 sequence at the start of `s` (no
/// overlongs, surrogates or code points past U+10FFFF), 0 when there is
/// none.
size_t utf8_sequence(std::string_view s) {
  auto b = [&](size_t i) {
    return static_cast<unsigned char>(s[i]);
  };
  auto cont = [&](size_t i) {
    return i < s.size() && (b(i) & 0xC0) == 0x80;
  };
  auto c = b(0);
  if (c < 0x80)
    return 1;
  if (c >= 0xC2 && c <= 0xDF)
    return cont(1) ? 2 : 0;
  if (c >= 0xE0 && c <= 0xEF) {
    if (!cont(1) || !cont(2))
      return 0;
    if ((c == 0xE0 && b(1) < 0xA0) || (c == 0xED && b(1) > 0x9F))
      return 0;
    return 3;
  }
  if (c >= 0xF0 && c <= 0xF4) {
    if (!cont(1) || !cont(2) || !cont(3))
      return 0;
    if ((c == 0xF0 && b(1) < 0x90) || (c == 0xF4 && b(1) > 0x8F))
      return 0;
    return 4;
  }
  return 0;
}

/// `s` with every invalid UTF-8 byte replaced by U+FFFD.
std::string make_valid_utf8(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  while (!s.empty()) {
    auto n = utf8_sequence(s);
    if (n == 0) {
      out += replacement;
      n = 1;
    } else {
      out.append(s.data(), n);
    }
    s.remove_prefix(n);
  }
  return out;
}

/// `bytes` converted from the iconv charset `from`; invalid or incomplete
/// sequences become U+FFFD. Nullopt when iconv does not know `from`.
std::optional<std::string> iconv_to_utf8(std::string_view bytes,
                                         const char* from) {
  auto cd = iconv_open("UTF-8", from);
  if (reinterpret_cast<intptr_t>(cd) == -1) // iconv's (iconv_t) -1
    return std::nullopt;
  std::string out;
  out.reserve(bytes.size() + bytes.size() / 2);
  char buf[4096];
  auto* in = const_cast<char*>(bytes.data());
  size_t in_left = bytes.size();
  while (in_left > 0) {
    char* o = buf;
    size_t o_left = sizeof(buf);
    auto r = iconv(cd, &in, &in_left, &o, &o_left);
    out.append(buf, static_cast<size_t>(o - buf));
    if (r != static_cast<size_t>(-1))
      break;
    if (errno == E2BIG)
      continue;
    // EILSEQ (a byte the charset does not map) or EINVAL (a sequence cut
    // short at the end): one replacement character, then carry on.
    out += replacement;
    ++in;
    --in_left;
    iconv(cd, nullptr, nullptr, nullptr, nullptr);
  }
  iconv_close(cd);
  return out;
}

std::string lower_ascii(std::string_view s) {
  std::string out{s};
  for (auto& c : out)
    if (c >= 'A' && c <= 'Z')
      c = static_cast<char>(c - 'A' + 'a');
  return out;
}

} // namespace

std::string charset_to_utf8(std::string_view bytes, std::string_view charset) {
  std::string name = lower_ascii(trim(charset));
  const char* iconv_name = nullptr;
  if (!name.empty()) {
    // GMime knows the aliases mail uses ("latin1", "x-unknown", ...);
    // g_mime_init has run (parse_mail and compose_mail call it).
    const char* canon = g_mime_charset_canon_name(name.c_str());
    name = lower_ascii(canon != nullptr ? canon : name.c_str());
    if (name == "iso-8859-1" || name == "latin1")
      name = "windows-1252";
    iconv_name = g_mime_charset_iconv_name(name.c_str());
  }
  bool undeclared = name.empty() || name == "us-ascii" || name == "utf-8"
                    || name == "utf8";
  if (!undeclared && iconv_name != nullptr)
    if (auto out = iconv_to_utf8(bytes, iconv_name))
      return *out;
  if (json::is_utf8(bytes))
    return std::string{bytes};
  if (name == "utf-8" || name == "utf8")
    return make_valid_utf8(bytes);
  if (auto out = iconv_to_utf8(bytes, "WINDOWS-1252"))
    return *out;
  return make_valid_utf8(bytes);
}

std::string clean_mail_text(std::string_view text) {
  auto valid = make_valid_utf8(text);
  std::string out;
  out.reserve(valid.size());
  for (size_t i = 0; i < valid.size(); ++i) {
    auto c = static_cast<unsigned char>(valid[i]);
    if (c == '\r') {
      out += '\n';
      if (i + 1 < valid.size() && valid[i + 1] == '\n')
        ++i;
      continue;
    }
    if ((c < 0x20 && c != '\t' && c != '\n') || c == 0x7F)
      continue;
    // C1 controls (U+0080..U+009F, UTF-8 C2 80..C2 9F).
    if (c == 0xC2 && i + 1 < valid.size()
        && static_cast<unsigned char>(valid[i + 1]) < 0xA0) {
      ++i;
      continue;
    }
    out += static_cast<char>(c);
  }
  return out;
}

std::string truncate_utf8(std::string_view s, size_t max_code_points) {
  size_t count = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    if ((static_cast<unsigned char>(s[i]) & 0xC0) == 0x80)
      continue;
    if (count == max_code_points)
      return std::string{s.substr(0, i)};
    ++count;
  }
  return std::string{s};
}

// -- HTML to text -------------------------------------------------------------

namespace {

struct named_entity {
  std::string_view name;
  uint32_t code_point;
};

// The named references mail HTML uses in practice (the full HTML5 table
// has 2231; anything else stays as written).
constexpr named_entity named_entities[] = {
  {"amp", '&'},       {"lt", '<'},        {"gt", '>'},       {"quot", '"'},
  {"apos", '\''},     {"nbsp", ' '},      {"ensp", ' '},     {"emsp", ' '},
  {"thinsp", ' '},    {"shy", 0xAD},      {"copy", 0xA9},    {"reg", 0xAE},
  {"trade", 0x2122},  {"hellip", 0x2026}, {"mdash", 0x2014}, {"ndash", 0x2013},
  {"lsquo", 0x2018},  {"rsquo", 0x2019},  {"sbquo", 0x201A}, {"ldquo", 0x201C},
  {"rdquo", 0x201D},  {"bdquo", 0x201E},  {"laquo", 0xAB},   {"raquo", 0xBB},
  {"lsaquo", 0x2039}, {"rsaquo", 0x203A}, {"bull", 0x2022},  {"middot", 0xB7},
  {"euro", 0x20AC},   {"pound", 0xA3},    {"yen", 0xA5},     {"cent", 0xA2},
  {"sect", 0xA7},     {"para", 0xB6},     {"deg", 0xB0},     {"plusmn", 0xB1},
  {"times", 0xD7},    {"divide", 0xF7},   {"frac12", 0xBD},  {"frac14", 0xBC},
  {"frac34", 0xBE},   {"iexcl", 0xA1},    {"iquest", 0xBF},  {"micro", 0xB5},
  {"agrave", 0xE0},   {"aacute", 0xE1},   {"acirc", 0xE2},   {"atilde", 0xE3},
  {"auml", 0xE4},     {"aring", 0xE5},    {"aelig", 0xE6},   {"ccedil", 0xE7},
  {"egrave", 0xE8},   {"eacute", 0xE9},   {"ecirc", 0xEA},   {"euml", 0xEB},
  {"igrave", 0xEC},   {"iacute", 0xED},   {"icirc", 0xEE},   {"iuml", 0xEF},
  {"ntilde", 0xF1},   {"ograve", 0xF2},   {"oacute", 0xF3},  {"ocirc", 0xF4},
  {"otilde", 0xF5},   {"ouml", 0xF6},     {"oslash", 0xF8},  {"ugrave", 0xF9},
  {"uacute", 0xFA},   {"ucirc", 0xFB},    {"uuml", 0xFC},    {"yacute", 0xFD},
  {"yuml", 0xFF},     {"szlig", 0xDF},    {"Agrave", 0xC0},  {"Aacute", 0xC1},
  {"Acirc", 0xC2},    {"Auml", 0xC4},     {"Aring", 0xC5},   {"Ccedil", 0xC7},
  {"Egrave", 0xC8},   {"Eacute", 0xC9},   {"Ecirc", 0xCA},   {"Ntilde", 0xD1},
  {"Ouml", 0xD6},     {"Oslash", 0xD8},   {"Uuml", 0xDC},    {"zwnj", 0x200C},
  {"zwj", 0x200D},    {"zwsp", 0x200B},
};

/// Decodes the character reference at `html[i]` ('&') into `out` and
/// returns the index after it; a '&' that starts none is kept as it is.
size_t decode_entity(std::string_view html, size_t i, std::string& out) {
  auto semi = html.find(';', i + 1);
  if (semi == std::string_view::npos || semi - i > 12) {
    out += '&';
    return i + 1;
  }
  auto body = html.substr(i + 1, semi - i - 1);
  if (!body.empty() && body[0] == '#') {
    uint32_t cp = 0;
    bool hex = body.size() > 1 && (body[1] == 'x' || body[1] == 'X');
    auto digits = body.substr(hex ? 2 : 1);
    if (digits.empty()) {
      out += '&';
      return i + 1;
    }
    for (char c : digits) {
      uint32_t d;
      if (c >= '0' && c <= '9')
        d = static_cast<uint32_t>(c - '0');
      else if (hex && c >= 'a' && c <= 'f')
        d = static_cast<uint32_t>(c - 'a' + 10);
      else if (hex && c >= 'A' && c <= 'F')
        d = static_cast<uint32_t>(c - 'A' + 10);
      else {
        out += '&';
        return i + 1;
      }
      cp = cp * (hex ? 16 : 10) + d;
      if (cp > 0x10FFFF)
        cp = 0x110000; // stays invalid, no overflow
    }
    append_utf8(out, cp);
    return semi + 1;
  }
  for (auto& e : named_entities)
    if (e.name == body) {
      if (e.code_point != 0xAD) // a soft hyphen is invisible
        append_utf8(out, e.code_point);
      return semi + 1;
    }
  out += '&';
  return i + 1;
}

/// Elements whose content is not text a person reads.
bool is_hidden_element(std::string_view name) {
  return name == "script" || name == "style" || name == "head"
         || name == "title" || name == "template" || name == "noscript";
}

/// The line breaks element `name` stands for, at its start and its end: 2
/// (a paragraph) for paragraphs, headings, lists, tables and quotes, 1 for
/// other blocks, 0 for inline elements.
int block_breaks(std::string_view name) {
  static constexpr std::string_view paragraphs[] = {
    "p",  "h1", "h2", "h3",    "h4",         "h5",  "h6",
    "ul", "ol", "dl", "table", "blockquote", "pre", "hr",
  };
  static constexpr std::string_view lines[] = {
    "div",    "li",     "tr",      "dt",  "dd",     "section", "article",
    "header", "footer", "address", "nav", "center", "form",    "fieldset",
  };
  for (auto b : paragraphs)
    if (name == b)
      return 2;
  for (auto b : lines)
    if (name == b)
      return 1;
  return 0;
}

/// The end of the tag starting at `html[i]` ('<'): the index after its
/// '>', quoted attribute values skipped.
size_t tag_end(std::string_view html, size_t i) {
  char quote = 0;
  for (size_t j = i + 1; j < html.size(); ++j) {
    char c = html[j];
    if (quote != 0) {
      if (c == quote)
        quote = 0;
    } else if (c == '"' || c == '\'') {
      quote = c;
    } else if (c == '>') {
      return j + 1;
    }
  }
  return html.size();
}

/// The lower-case element name of the tag at `html[i]` ('<'), and whether
/// it closes an element.
std::pair<std::string, bool> tag_name(std::string_view html, size_t i) {
  size_t j = i + 1;
  bool closing = j < html.size() && html[j] == '/';
  if (closing)
    ++j;
  std::string name;
  while (j < html.size() && name.size() < 16) {
    char c = html[j];
    bool alnum = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
                 || (c >= '0' && c <= '9');
    if (!alnum)
      break;
    name += static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
    ++j;
  }
  return {name, closing};
}

/// Where the content of hidden element `name` ends: the index after its
/// closing tag (or the end).
size_t skip_hidden(std::string_view html, size_t from, std::string_view name) {
  for (auto i = html.find('<', from); i != std::string_view::npos;
       i = html.find('<', i + 1)) {
    auto [n, closing] = tag_name(html, i);
    if (closing && n == name)
      return tag_end(html, i);
  }
  return html.size();
}

/// Blanks collapsed, lines trimmed, at most one empty line in a row.
std::string tidy_lines(std::string_view text) {
  std::string out;
  size_t newlines = 0;
  bool pending_space = false;
  for (char c : text) {
    if (c == '\n') {
      pending_space = false;
      if (!out.empty())
        ++newlines;
      continue;
    }
    if (c == ' ' || c == '\t') {
      pending_space = true;
      continue;
    }
    if (newlines > 0) {
      out.append(std::min<size_t>(newlines, 2), '\n');
      newlines = 0;
    } else if (pending_space && !out.empty()) {
      out += ' ';
    }
    pending_space = false;
    out += c;
  }
  return out;
}

} // namespace

std::string html_to_text(std::string_view html) {
  std::string out;
  out.reserve(html.size() / 2);
  // Line breaks owed before the next text: blocks around each other give
  // the most any of them asks for, not the sum.
  int pending = 0;
  auto text = [&](auto&& append) {
    if (pending > 0) {
      if (!out.empty())
        out.append(static_cast<size_t>(pending), '\n');
      pending = 0;
    }
    append();
  };
  size_t i = 0;
  while (i < html.size()) {
    char c = html[i];
    if (c == '<' && html.substr(i, 4) == "<!--") {
      auto end = html.find("-->", i + 4);
      i = end == std::string_view::npos ? html.size() : end + 3;
      continue;
    }
    if (c == '<') {
      auto [name, closing] = tag_name(html, i);
      if (name.empty() && !closing && html.substr(i, 2) != "<!"
          && html.substr(i, 2) != "<?") {
        text([&] {
          out += '<';
        }); // a lone '<' in text
        ++i;
        continue;
      }
      auto end = tag_end(html, i);
      if (!closing && is_hidden_element(name))
        end = skip_hidden(html, end, name);
      else if (name == "br")
        text([&] {
          out += '\n';
        });
      else if (name == "td" || name == "th")
        out += ' ';
      else
        pending = std::max(pending, block_breaks(name));
      i = end;
    } else if (c == '&') {
      text([&] {
        i = decode_entity(html, i, out);
      });
    } else if (is_ascii_space(c)) {
      out += ' ';
      ++i;
    } else {
      text([&] {
        out += c;
      });
      ++i;
    }
  }
  return tidy_lines(clean_mail_text(out));
}

} // namespace butlers
