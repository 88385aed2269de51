#include "storage/naming.hpp"

#include <fmt/format.h>

namespace troupe::storage {

namespace {

std::uint64_t fnv1a(std::string_view s) {
  std::uint64_t h = 14695981039346656037ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

std::string area_key(const area& a) {
  std::string key = a.schema;
  key.push_back('\0');
  key += a.prefix;
  key.push_back('\0');
  return key;
}

} // namespace

std::string quote_identifier(std::string_view name) {
  std::string out;
  out.reserve(name.size() + 2);
  out.push_back('"');
  for (char c : name) {
    if (c == '"')
      out.push_back('"');
    out.push_back(c);
  }
  out.push_back('"');
  return out;
}

std::string wake_channel(const area& a) {
  auto plain = fmt::format("{}.{}wake", a.schema, a.prefix);
  if (plain.size() <= 63)
    return plain;
  return fmt::format("troupe.{:016x}", fnv1a(area_key(a)));
}

std::string results_channel(const area& a) {
  auto plain = fmt::format("{}.{}results", a.schema, a.prefix);
  if (plain.size() <= 63)
    return plain;
  return fmt::format("troupe.r{:016x}", fnv1a(area_key(a)));
}

std::string coordination_channel(const area& a) {
  auto plain = fmt::format("{}.{}coordination", a.schema, a.prefix);
  if (plain.size() <= 63)
    return plain;
  return fmt::format("troupe.c{:016x}", fnv1a(area_key(a)));
}

std::int32_t coordination_lock_class(const area& a) {
  auto h = fnv1a(area_key(a) + "coordination");
  return static_cast<std::int32_t>((h ^ (h >> 32)) & 0x7fffffff);
}

std::int32_t node_lock_class(const area& a) {
  auto h = fnv1a(area_key(a) + "nodes");
  return static_cast<std::int32_t>((h ^ (h >> 32)) & 0x7fffffff);
}

} // namespace troupe::storage
