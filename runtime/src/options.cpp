#include "troupe/options.hpp"

#include "troupe/error.hpp"

#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

namespace troupe {

namespace {

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
  rapidjson::StringBuffer buf;
  rapidjson::Writer<rapidjson::StringBuffer> writer(buf);
  doc.Accept(writer);
  return {buf.GetString(), buf.GetSize()};
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

} // namespace troupe
