#include "troupe/composition.hpp"

#include "json_options.hpp"
#include "pipeline_steps.hpp"
#include "troupe/error.hpp"
#include "troupe/options.hpp"

#include <fmt/format.h>
#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <chrono>
#include <set>

namespace troupe {

namespace detail {

std::string step_json(const message& m) {
  rapidjson::StringBuffer buf;
  rapidjson::Writer<rapidjson::StringBuffer> w(buf);
  auto text = [&](const char* key, const std::string& v) {
    w.Key(key);
    w.String(v.data(), static_cast<rapidjson::SizeType>(v.size()));
  };
  auto raw = [&](const char* key, const std::string& json, rapidjson::Type type) {
    w.Key(key);
    w.RawValue(json.data(), json.size(), type);
  };
  w.StartObject();
  text("id", m.id);
  text("queue", m.queue);
  text("task", m.task);
  raw("args", m.args_json.empty() ? std::string("[]") : m.args_json, rapidjson::kArrayType);
  raw("options", m.options_json.empty() ? std::string("{}") : m.options_json,
      rapidjson::kObjectType);
  w.Key("priority");
  w.Int(m.priority);
  w.Key("delay_ms");
  w.Int64(m.delay_ms);
  w.EndObject();
  return {buf.GetString(), buf.GetSize()};
}

std::optional<message> next_step(std::string_view options_json, std::string_view result_json) {
  auto target = option_object(options_json, "pipe_target");
  if (!target)
    return std::nullopt;
  rapidjson::Document doc;
  doc.Parse(target->data(), target->size());
  auto str = [&](const char* key) -> std::string {
    auto it = doc.FindMember(key);
    if (it == doc.MemberEnd() || !it->value.IsString())
      throw error(errc::decode_failed,
                  fmt::format("the pipeline's next step has no string \"{}\"", key));
    return {it->value.GetString(), it->value.GetStringLength()};
  };
  auto json = [&](const char* key, bool array) -> std::string {
    auto it = doc.FindMember(key);
    if (it == doc.MemberEnd() || (array ? !it->value.IsArray() : !it->value.IsObject()))
      throw error(errc::decode_failed, fmt::format("the pipeline's next step has no {} \"{}\"",
                                                   array ? "array" : "object", key));
    return write_json(it->value);
  };
  message m;
  m.id = str("id");
  m.queue = str("queue");
  m.task = str("task");
  m.args_json = json("args", true);
  m.options_json = json("options", false);
  if (auto it = doc.FindMember("priority"); it != doc.MemberEnd() && it->value.IsInt())
    m.priority = it->value.GetInt();
  if (auto it = doc.FindMember("delay_ms"); it != doc.MemberEnd() && it->value.IsInt64())
    m.delay_ms = it->value.GetInt64();
  m.timestamp_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                     std::chrono::system_clock::now().time_since_epoch())
                     .count(); // published now
  if (!option_bool(m.options_json, "pipe_ignore").value_or(false))
    m.args_json = append_to_array(m.args_json, result_json.empty() ? "null" : result_json);
  return m;
}

} // namespace detail

pipeline::pipeline(std::vector<message> steps) : steps_(std::move(steps)) {
  if (steps_.empty())
    throw error(errc::invalid_argument, "a pipeline needs at least one step");
  if (steps_.size() > max_pipeline_steps)
    throw error(errc::invalid_argument, fmt::format("a pipeline has at most {} steps, got {}",
                                                    max_pipeline_steps, steps_.size()));
  std::set<std::string> ids;
  for (auto& s : steps_) {
    normalize_message(s);
    if (!ids.insert(s.id).second)
      throw error(errc::invalid_argument,
                  "message " + s.id + " is more than one step of the pipeline");
  }
  id_ = steps_.front().id;
  for (auto& s : steps_)
    s.options_json = with_option(s.options_json, "composition_id", id_);
  // From the last step back: each carries the next one, which carries the rest.
  std::string target;
  for (auto i = steps_.size(); i-- > 0;) {
    auto step = steps_[i];
    if (!target.empty())
      step.options_json = detail::with_object_option(step.options_json, "pipe_target", target);
    if (i == 0)
      first_ = step;
    else
      target = detail::step_json(step);
  }
}

message pipeline::run(client& c, const enqueue_options& options) const {
  return c.enqueue(first_, options);
}

message pipeline::run_in_transaction(pg_conn* conn, const area& where,
                                     const enqueue_options& options) const {
  return enqueue_in_transaction(conn, where, first_, options);
}

std::string pipeline::get_result_json(client& c, bool block,
                                      std::chrono::milliseconds timeout) const {
  return c.get_result_json(last().id, block, timeout);
}

std::vector<std::string> pipeline::get_results_json(client& c, bool block,
                                                    std::chrono::milliseconds timeout) const {
  std::vector<std::string> out;
  for (const auto& s : steps_)
    out.push_back(c.get_result_json(s.id, block, timeout));
  return out;
}

std::size_t pipeline::completed_count(client& c) const {
  std::size_t n = 0;
  for (const auto& s : steps_) {
    try {
      c.get_result_json(s.id);
    } catch (const result_error&) {
      break;
    }
    ++n;
  }
  return n;
}

message pipe_ignore(message m) {
  m.options_json = with_option(m.options_json, "pipe_ignore", true);
  return m;
}

} // namespace troupe
