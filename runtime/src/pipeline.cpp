#include "troupe/composition.hpp"

#include "composition_access.hpp"
#include "json_options.hpp"
#include "pipeline_steps.hpp"
#include "troupe/error.hpp"
#include "troupe/options.hpp"

#include <fmt/format.h>
#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <algorithm>
#include <chrono>

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

namespace {

message step_from_json(const rapidjson::Value& doc) {
  if (!doc.IsObject())
    throw error(errc::decode_failed, "the pipeline's next step is not a JSON object");
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
  return m;
}

} // namespace

std::vector<message> next_steps(std::string_view options_json, std::string_view result_json) {
  std::vector<message> out;
  auto target = option_object(options_json, "pipe_target");
  if (!target)
    return out;
  rapidjson::Document doc;
  doc.Parse(target->data(), target->size());
  if (auto g = doc.FindMember("group"); g != doc.MemberEnd()) {
    auto members = g->value.IsObject() ? g->value.FindMember("members") : g->value.MemberEnd();
    if (!g->value.IsObject() || members == g->value.MemberEnd() || !members->value.IsArray() ||
        members->value.Empty())
      throw error(errc::decode_failed,
                  "the pipeline's next step is a group without an array \"members\"");
    for (const auto& m : members->value.GetArray())
      out.push_back(step_from_json(m));
  } else {
    out.push_back(step_from_json(doc));
  }
  for (auto& m : out)
    if (!option_bool(m.options_json, "pipe_ignore").value_or(false))
      m.args_json = append_to_array(m.args_json, result_json.empty() ? "null" : result_json);
  return out;
}

namespace {

// The pipe_target JSON of a step that publishes `published`: the message, or a group's
// members.
std::string target_of(const std::vector<message>& published, bool is_group) {
  if (!is_group)
    return step_json(published.front());
  std::string out = R"({"group":{"members":[)";
  for (std::size_t i = 0; i < published.size(); ++i) {
    if (i > 0)
      out += ',';
    out += step_json(published[i]);
  }
  return out + "]}}";
}

} // namespace

std::vector<message> render_pipeline(const std::vector<step>& steps,
                                     const std::string& composition_id,
                                     const std::string& group_id) {
  std::vector<message> published;
  std::string target;
  for (auto i = steps.size(); i-- > 0;) {
    if (auto* m = steps[i].as_message()) {
      auto s = *m;
      s.options_json = with_option(s.options_json, "composition_id", composition_id);
      if (i + 1 == steps.size() && !group_id.empty())
        s.options_json = with_option(s.options_json, "group_id", group_id);
      if (!target.empty())
        s.options_json = with_object_option(s.options_json, "pipe_target", target);
      published = {std::move(s)};
      target = target_of(published, false);
    } else {
      if (i + 1 == steps.size() && !group_id.empty())
        throw error(errc::invalid_argument,
                    "a pipeline that is a group member must end with a message, not a group");
      published = render_group(*steps[i].as_group(), composition_id, target);
      target = target_of(published, true);
    }
  }
  return published;
}

void collect_ids(const std::vector<step>& steps, std::vector<std::string>& out) {
  for (const auto& s : steps) {
    if (auto* m = s.as_message())
      out.push_back(m->id);
    else
      collect_ids(*s.as_group(), out);
  }
}

void require_unique(std::vector<std::string> ids, std::string_view what) {
  std::sort(ids.begin(), ids.end());
  if (auto dup = std::adjacent_find(ids.begin(), ids.end()); dup != ids.end())
    throw error(errc::invalid_argument,
                fmt::format("message {} is used more than once in the {}", *dup, what));
}

std::vector<enqueue_options> composition_options(const enqueue_options& options, std::size_t n,
                                                 std::string_view what) {
  if (!options.deduplication_key.empty())
    throw error(errc::invalid_argument,
                fmt::format("a {} is published without a deduplication key", what));
  if (!options.delay)
    return {};
  return std::vector<enqueue_options>(n, options);
}

} // namespace detail

pipeline::pipeline(std::vector<step> steps) : steps_(std::move(steps)) {
  if (steps_.empty())
    throw error(errc::invalid_argument, "a pipeline needs at least one step");
  if (steps_.size() > max_pipeline_steps)
    throw error(errc::invalid_argument, fmt::format("a pipeline has at most {} steps, got {}",
                                                    max_pipeline_steps, steps_.size()));
  for (auto& s : steps_) {
    if (auto* m = s.as_message()) {
      auto copy = *m;
      normalize_message(copy);
      s = step(std::move(copy));
    }
  }
  std::vector<std::string> ids;
  detail::collect_ids(steps_, ids);
  detail::require_unique(ids, "pipeline");
  id_ =
    steps_.front().as_message() ? steps_.front().as_message()->id : steps_.front().as_group()->id();
}

const message& pipeline::last() const {
  auto* m = steps_.back().as_message();
  if (!m)
    throw error(errc::invalid_argument,
                "the pipeline ends with a group: read its results through the group");
  return *m;
}

std::vector<message> pipeline::messages() const {
  return detail::render_pipeline(steps_, id_, {});
}

namespace {

// Whether publishing the pipeline needs groups (migration 6): any step that is a group.
bool holds_group(const std::vector<step>& steps) {
  return std::any_of(steps.begin(), steps.end(), [](const step& s) { return s.as_group(); });
}

} // namespace

std::vector<message> pipeline::run(client& c, const enqueue_options& options) const {
  auto published = messages();
  auto opts = detail::composition_options(options, published.size(), "pipeline");
  if (holds_group(steps_))
    detail::require_groups(c);
  return c.enqueue_many(std::move(published), std::move(opts));
}

std::vector<message> pipeline::run_in_transaction(pg_conn* conn, const area& where,
                                                  const enqueue_options& options) const {
  auto published = messages();
  auto opts = detail::composition_options(options, published.size(), "pipeline");
  if (holds_group(steps_))
    detail::require_groups(conn, where);
  return enqueue_many_in_transaction(conn, where, std::move(published), std::move(opts));
}

std::string pipeline::get_result_json(client& c, bool block,
                                      std::chrono::milliseconds timeout) const {
  return c.get_result_json(last().id, block, timeout);
}

std::vector<std::string> pipeline::get_results_json(client& c, bool block,
                                                    std::chrono::milliseconds timeout) const {
  std::vector<std::string> out;
  for (const auto& s : steps_) {
    if (auto* m = s.as_message()) {
      out.push_back(c.get_result_json(m->id, block, timeout));
      continue;
    }
    std::string list = "[";
    for (const auto& r : s.as_group()->get_results_json(c, block, timeout))
      list += (list.size() > 1 ? "," : "") + r;
    out.push_back(list + "]");
  }
  return out;
}

std::size_t pipeline::completed_count(client& c) const {
  std::size_t n = 0;
  for (const auto& s : steps_) {
    if (auto* m = s.as_message()) {
      try {
        c.get_result_json(m->id);
      } catch (const result_error&) {
        break;
      }
    } else {
      try {
        if (!s.as_group()->completed(c))
          break;
      } catch (const error& e) {
        if (e.code() != errc::not_found)
          throw;
        break;
      }
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
