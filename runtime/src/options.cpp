#include "troupe/options.hpp"

#include "json_options.hpp"

#include "troupe/coordination.hpp"
#include "troupe/error.hpp"
#include "troupe/limits.hpp"

#include <fmt/format.h>

#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

namespace troupe {

std::string detail::write_json(const rapidjson::Value& v) {
  rapidjson::StringBuffer buf;
  rapidjson::Writer<rapidjson::StringBuffer> writer(buf);
  v.Accept(writer);
  return {buf.GetString(), buf.GetSize()};
}

namespace {

using detail::write_json;

const rapidjson::Value* lookup(rapidjson::Document& doc, std::string_view json,
                               std::string_view key) {
  doc.Parse(json.data(), json.size());
  if (doc.HasParseError() || !doc.IsObject())
    return nullptr;
  auto it =
    doc.FindMember(rapidjson::Value(key.data(), static_cast<rapidjson::SizeType>(key.size())));
  return it == doc.MemberEnd() ? nullptr : &it->value;
}

template <class Set>
std::string set_member(std::string_view json, std::string_view key, Set&& set) {
  rapidjson::Document doc;
  doc.Parse(json.data(), json.size());
  if (json.empty())
    doc.SetObject();
  else if (doc.HasParseError() || !doc.IsObject())
    throw error(errc::invalid_argument,
                "message options must be a JSON object, got " + std::string(json));
  auto& alloc = doc.GetAllocator();
  rapidjson::Value name(key.data(), static_cast<rapidjson::SizeType>(key.size()), alloc);
  rapidjson::Value value;
  set(value, alloc);
  auto it = doc.FindMember(name);
  if (it != doc.MemberEnd())
    it->value = value;
  else
    doc.AddMember(name, value, alloc);
  return write_json(doc);
}

} // namespace

std::optional<std::int64_t> option_int(std::string_view options_json, std::string_view key) {
  rapidjson::Document doc;
  auto* v = lookup(doc, options_json, key);
  if (v && v->IsInt64())
    return v->GetInt64();
  return std::nullopt;
}

std::optional<std::string> option_string(std::string_view options_json, std::string_view key) {
  rapidjson::Document doc;
  auto* v = lookup(doc, options_json, key);
  if (v && v->IsString())
    return std::string(v->GetString(), v->GetStringLength());
  return std::nullopt;
}

std::optional<bool> option_bool(std::string_view options_json, std::string_view key) {
  rapidjson::Document doc;
  auto* v = lookup(doc, options_json, key);
  if (v && v->IsBool())
    return v->GetBool();
  return std::nullopt;
}

std::string with_option(std::string_view options_json, std::string_view key, std::int64_t value) {
  return set_member(options_json, key, [&](rapidjson::Value& v, auto&) { v.SetInt64(value); });
}

std::string with_option(std::string_view options_json, std::string_view key,
                        std::string_view value) {
  return set_member(options_json, key, [&](rapidjson::Value& v, auto& alloc) {
    v.SetString(value.data(), static_cast<rapidjson::SizeType>(value.size()), alloc);
  });
}

std::string with_option(std::string_view options_json, std::string_view key, bool value) {
  return set_member(options_json, key, [&](rapidjson::Value& v, auto&) { v.SetBool(value); });
}

namespace detail {

std::optional<std::string> option_object(std::string_view options_json, std::string_view key) {
  rapidjson::Document doc;
  auto* v = lookup(doc, options_json, key);
  if (v && v->IsObject())
    return write_json(*v);
  return std::nullopt;
}

std::optional<std::string> option_json(std::string_view options_json, std::string_view key) {
  rapidjson::Document doc;
  if (auto* v = lookup(doc, options_json, key))
    return write_json(*v);
  return std::nullopt;
}

namespace {

// `options_json` with `key` set to `value_json`, which must parse (and be an object when
// `object` is set).
std::string set_json_member(std::string_view options_json, std::string_view key,
                            std::string_view value_json, bool object) {
  rapidjson::Document value;
  value.Parse(value_json.data(), value_json.size());
  if (value.HasParseError() || (object && !value.IsObject()))
    throw error(errc::invalid_argument, "option " + std::string(key) +
                                          (object ? " must be a JSON object" : " must be JSON"));
  return set_member(options_json, key,
                    [&](rapidjson::Value& v, auto& alloc) { v.CopyFrom(value, alloc); });
}

} // namespace

std::string with_object_option(std::string_view options_json, std::string_view key,
                               std::string_view object_json) {
  return set_json_member(options_json, key, object_json, true);
}

std::string with_json_option(std::string_view options_json, std::string_view key,
                             std::string_view value_json) {
  return set_json_member(options_json, key, value_json, false);
}

std::string append_to_array(std::string_view array_json, std::string_view value_json) {
  rapidjson::Document arr;
  arr.Parse(array_json.data(), array_json.size());
  rapidjson::Document value;
  value.Parse(value_json.data(), value_json.size());
  if (arr.HasParseError() || !arr.IsArray() || value.HasParseError())
    throw error(errc::invalid_argument,
                "cannot append a result to the arguments " + std::string(array_json.substr(0, 80)));
  arr.PushBack(rapidjson::Value(value, arr.GetAllocator()), arr.GetAllocator());
  return write_json(arr);
}

} // namespace detail

} // namespace troupe

namespace troupe::limits {

std::optional<std::string> check_message_options(std::string_view options_json) {
  if (options_json.empty() || options_json == "{}")
    return std::nullopt; // the common case, without a parse
  rapidjson::Document doc;
  doc.Parse(options_json.data(), options_json.size());
  if (doc.HasParseError() || !doc.IsObject())
    return std::string("they are not a JSON object");
  for (auto it = doc.MemberBegin(); it != doc.MemberEnd(); ++it) {
    std::string_view key{it->name.GetString(), it->name.GetStringLength()};
    const auto& v = it->value;
    auto range = [&](std::int64_t least, std::int64_t most,
                     std::string_view unit) -> std::optional<std::string> {
      if (!v.IsInt64())
        return fmt::format("{}: expected an integer{}", key,
                           unit.empty() ? "" : " of " + std::string(unit));
      auto n = v.GetInt64();
      if (n < least || n > most)
        return fmt::format("{}: {} is out of range ({} to {}{})", key, n, least, most,
                           unit.empty() ? "" : " " + std::string(unit));
      return std::nullopt;
    };
    std::optional<std::string> fault;
    if (key == "time_limit" || key == "min_backoff" || key == "max_backoff" || key == "max_age" ||
        key == "result_ttl")
      fault = range(0, max_option_ms, "ms");
    else if (key == "max_retries")
      fault = range(0, max_retries, "");
    else if (key == "store_results" || key == "notify_shutdown" || key == "pipe_ignore")
      fault = v.IsBool()
                ? std::nullopt
                : std::optional<std::string>(fmt::format("{}: expected true or false", key));
    else if (key == "on_success" || key == "on_failure" || key == "on_retry_exhausted")
      fault = v.IsString() && v.GetStringLength() <= max_task_name
                ? std::nullopt
                : std::optional<std::string>(fmt::format(
                    "{}: expected a task name (a string of at most {} bytes)", key, max_task_name));
    else if (key == "limits" || key == "concurrency_key" || key == "concurrency_limit")
      fault = detail::check_coordination_options(options_json);
    if (fault)
      return fault;
  }
  return std::nullopt;
}

} // namespace troupe::limits
