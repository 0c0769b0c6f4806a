#include "runtime/pg_array.hpp"

#include <stdexcept>

#include "runtime/uuid.hpp"

namespace butlers {

namespace {

/// The header: ndim, flags (has NULLs), element type, then one dimension's
/// length and lower bound. take() fills it in; an empty array has no
/// dimension.
constexpr size_t header_bytes = 5 * 4;

void store32(char* at, uint32_t v) {
  at[0] = static_cast<char>(v >> 24);
  at[1] = static_cast<char>(v >> 16);
  at[2] = static_cast<char>(v >> 8);
  at[3] = static_cast<char>(v);
}

const char* element_name(pg_array::element type) {
  switch (type) {
    case pg_array::element::int8: return "int8";
    case pg_array::element::text: return "text";
    case pg_array::element::uuid: return "uuid";
  }
  return "?";
}

} // namespace

pg_array::pg_array(element type) : type_{type} {
  start();
}

void pg_array::start() {
  bytes_.assign(header_bytes, '\0');
  size_ = 0;
  has_null_ = false;
}

void pg_array::put32(uint32_t v) {
  char b[4];
  store32(b, v);
  bytes_.append(b, 4);
}

pg_array& pg_array::add(std::string_view value) {
  if (type_ == element::text) {
    if (value.size() > 0x7fffffffu)
      throw std::length_error("pg_array: element over 2 GiB");
    put32(static_cast<uint32_t>(value.size()));
    bytes_.append(value.data(), value.size());
  } else if (type_ == element::uuid) {
    // The canonical form, as PostgreSQL prints it and make_uuid_v7 writes.
    auto id = uuid::parse(value);
    if (!id)
      throw std::invalid_argument("pg_array: not a UUID: '"
                                  + std::string{value.substr(0, 64)} + "'");
    put32(16);
    bytes_.append(reinterpret_cast<const char*>(id->bytes.data()), 16);
  } else {
    throw std::logic_error(std::string{"pg_array: a string added to an "}
                           + element_name(type_) + " array");
  }
  ++size_;
  return *this;
}

pg_array& pg_array::add(int64_t value) {
  if (type_ != element::int8)
    throw std::logic_error(std::string{"pg_array: an integer added to a "}
                           + element_name(type_) + " array");
  auto v = static_cast<uint64_t>(value);
  put32(8);
  put32(static_cast<uint32_t>(v >> 32));
  put32(static_cast<uint32_t>(v));
  ++size_;
  return *this;
}

pg_array& pg_array::null() {
  put32(0xffffffffu); // length -1
  has_null_ = true;
  ++size_;
  return *this;
}

pqxx::binarystring pg_array::take() {
  if (size_ > 0x7fffffffu)
    throw std::length_error("pg_array: too many elements");
  char* h = bytes_.data();
  store32(h + 4, has_null_ ? 1 : 0);
  store32(h + 8, static_cast<uint32_t>(type_));
  std::string_view out{bytes_};
  if (size_ == 0) {
    // No dimensions: ndim 0 and no length or lower bound.
    store32(h, 0);
    out = out.substr(0, 12);
  } else {
    store32(h, 1);
    store32(h + 12, static_cast<uint32_t>(size_));
    store32(h + 16, 1);
  }
  pqxx::binarystring result{out.data(), out.size()};
  start();
  return result;
}

} // namespace butlers
