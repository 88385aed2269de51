// Limiters as values and as message options: their checks, their JSON in a message's options
// ("limits", "concurrency_key", "concurrency_limit"), and the message setters. The guards and
// barriers, which need a connection, are in coordination.cpp.
#include "troupe/coordination.hpp"

#include "json_options.hpp"

#include "troupe/error.hpp"
#include "troupe/message.hpp"
#include "troupe/options.hpp"

#include <fmt/format.h>

#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

namespace troupe {

namespace {

std::optional<std::string> key_fault(std::string_view what, std::string_view key) {
  if (key.empty())
    return fmt::format("{}: the key is empty", what);
  if (key.size() > max_limit_key)
    return fmt::format("{} \"{}...\": the key is longer than {} bytes", what, key.substr(0, 40),
                       max_limit_key);
  return std::nullopt;
}

std::optional<std::string> limit_fault(const limit& l) {
  if (auto f = key_fault("limiter", l.key))
    return f;
  if (l.capacity < 1 || l.capacity > max_limit_capacity)
    return fmt::format("limiter \"{}\": limit {} is out of range (1 to {})", l.key, l.capacity,
                       max_limit_capacity);
  if (l.kind != limit_kind::concurrent &&
      (l.span.count() < 1 || l.span.count() > max_limit_window_ms))
    return fmt::format("limiter \"{}\": window {} ms is out of range (1 to {} ms)", l.key,
                       l.span.count(), max_limit_window_ms);
  return std::nullopt;
}

limit checked(limit l) {
  validate_limit(l);
  return l;
}

} // namespace

std::string_view to_string(limit_kind kind) noexcept {
  switch (kind) {
  case limit_kind::concurrent:
    return "concurrent";
  case limit_kind::bucket:
    return "bucket";
  case limit_kind::window:
    return "window";
  }
  return "concurrent";
}

limit_kind parse_limit_kind(std::string_view name, std::string_view key) {
  for (auto k : {limit_kind::concurrent, limit_kind::bucket, limit_kind::window})
    if (name == to_string(k))
      return k;
  throw error(
    errc::invalid_argument,
    fmt::format("limiter \"{}\": unknown kind \"{}\" (concurrent, bucket or window)", key, name));
}

void validate_limit(const limit& l) {
  if (auto f = limit_fault(l))
    throw error(errc::invalid_argument, *f);
}

limit concurrency(std::string key, std::int32_t n) {
  return checked(limit{limit_kind::concurrent, std::move(key), n, std::chrono::milliseconds{0}});
}

limit bucket(std::string key, std::int32_t n, std::chrono::milliseconds span) {
  return checked(limit{limit_kind::bucket, std::move(key), n, span});
}

limit window(std::string key, std::int32_t n, std::chrono::milliseconds span) {
  return checked(limit{limit_kind::window, std::move(key), n, span});
}

limit_refused::limit_refused(const std::string& key)
    : std::runtime_error("limiter \"" + key + "\" has no room"), key_(key) {}

namespace detail {

std::string with_limits_option(std::string_view options_json, const std::vector<limit>& ls) {
  if (ls.empty())
    return std::string(options_json);
  rapidjson::Document arr(rapidjson::kArrayType);
  auto& alloc = arr.GetAllocator();
  for (const auto& l : ls) {
    validate_limit(l);
    rapidjson::Value o(rapidjson::kObjectType);
    auto kind = to_string(l.kind);
    o.AddMember("key", rapidjson::Value(l.key.data(), l.key.size(), alloc), alloc);
    o.AddMember("kind", rapidjson::Value(kind.data(), kind.size(), alloc), alloc);
    o.AddMember("limit", l.capacity, alloc);
    if (l.kind != limit_kind::concurrent)
      o.AddMember("window_ms", static_cast<std::int64_t>(l.span.count()), alloc);
    arr.PushBack(o, alloc);
  }
  return with_json_option(options_json, "limits", write_json(arr));
}

std::optional<std::string> check_coordination_options(std::string_view options_json) {
  rapidjson::Document doc;
  doc.Parse(options_json.data(), options_json.size());
  if (doc.HasParseError() || !doc.IsObject())
    return std::nullopt; // check_message_options reports that
  if (auto it = doc.FindMember("limits"); it != doc.MemberEnd()) {
    if (!it->value.IsArray())
      return std::string("limits: expected an array of limiters");
    for (const auto& e : it->value.GetArray()) {
      if (!e.IsObject() || !e.HasMember("key") || !e["key"].IsString())
        return std::string("limits: an entry without a key (a string)");
      limit l;
      l.key.assign(e["key"].GetString(), e["key"].GetStringLength());
      if (!e.HasMember("kind") || !e["kind"].IsString())
        return fmt::format("limiter \"{}\": no kind (concurrent, bucket or window)", l.key);
      try {
        l.kind = parse_limit_kind({e["kind"].GetString(), e["kind"].GetStringLength()}, l.key);
      } catch (const error& x) {
        return std::string(x.what());
      }
      if (!e.HasMember("limit") || !e["limit"].IsInt())
        return fmt::format("limiter \"{}\": limit is not a whole number", l.key);
      l.capacity = e["limit"].GetInt();
      if (l.kind != limit_kind::concurrent) {
        if (!e.HasMember("window_ms") || !e["window_ms"].IsInt64())
          return fmt::format("limiter \"{}\": window_ms is not a whole number", l.key);
        l.span = std::chrono::milliseconds{e["window_ms"].GetInt64()};
      }
      if (auto f = limit_fault(l))
        return f;
    }
  }
  if (auto it = doc.FindMember("concurrency_key"); it != doc.MemberEnd()) {
    if (!it->value.IsString())
      return std::string("concurrency_key: expected a string");
    if (auto f = key_fault("concurrency key", {it->value.GetString(), it->value.GetStringLength()}))
      return f;
  }
  if (auto it = doc.FindMember("concurrency_limit"); it != doc.MemberEnd())
    if (!it->value.IsInt() || it->value.GetInt() < 1 || it->value.GetInt() > max_limit_capacity)
      return fmt::format("concurrency_limit: expected a whole number from 1 to {}",
                         max_limit_capacity);
  return std::nullopt;
}

} // namespace detail

message message::with_limits(const std::vector<limit>& ls) const {
  auto copy = *this;
  copy.options_json = detail::with_limits_option(options_json, ls);
  return copy;
}

message message::with_concurrency_key(std::string key) const {
  if (auto f = key_fault("concurrency key", key))
    throw error(errc::invalid_argument, *f);
  auto copy = *this;
  copy.options_json = with_option(options_json, "concurrency_key", std::string_view(key));
  return copy;
}

message message::with_concurrency_limit(std::int32_t per_key) const {
  if (per_key < 1 || per_key > max_limit_capacity)
    throw error(
      errc::invalid_argument,
      fmt::format("concurrency_limit: {} is out of range (1 to {})", per_key, max_limit_capacity));
  auto copy = *this;
  copy.options_json =
    with_option(options_json, "concurrency_limit", static_cast<std::int64_t>(per_key));
  return copy;
}

} // namespace troupe
