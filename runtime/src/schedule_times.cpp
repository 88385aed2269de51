#include "schedule_times.hpp"

#include "troupe/area.hpp"
#include "troupe/cron.hpp"
#include "troupe/error.hpp"
#include "troupe/json.hpp"
#include "troupe/limits.hpp"
#include "utf8.hpp"

#include <fmt/format.h>

#include <rapidjson/document.h>

namespace troupe::detail {

namespace {

using clock = std::chrono::system_clock;

clock::time_point at(std::int64_t ms) {
  return clock::time_point(std::chrono::milliseconds(ms));
}

std::int64_t ms_of(clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count();
}

void refuse(const std::string& name, const std::string& what) {
  throw error(errc::invalid_argument, fmt::format("schedule \"{}\": {}", name, what));
}

bool json_is(std::string_view text, rapidjson::Type type) {
  rapidjson::Document doc;
  doc.Parse(text.data(), text.size());
  return !doc.HasParseError() && doc.GetType() == type;
}

bool plain_text(std::string_view text) {
  for (std::size_t i = 0; i < text.size();) {
    auto c = static_cast<unsigned char>(text[i]);
    auto n = utf8_sequence(text, i);
    if (n == 0 || c < 0x20 || c == 0x7f)
      return false;
    i += n;
  }
  return true;
}

} // namespace

void validate_schedule_spec(const schedule_spec& s) {
  if (s.name.empty())
    throw error(errc::invalid_argument, "a schedule needs a name");
  if (s.name.size() > 200)
    throw error(errc::invalid_argument, fmt::format("schedule name \"{}...\" is longer than 200 "
                                                    "bytes",
                                                    s.name.substr(0, 40)));
  if (!plain_text(s.name))
    throw error(errc::invalid_argument,
                "schedule name is not UTF-8 text without control characters");
  if (s.task.empty())
    refuse(s.name, "no task name");
  if (s.task.size() > limits::max_task_name)
    refuse(s.name, fmt::format("task name is longer than {} bytes", limits::max_task_name));
  if (s.args_json.size() + s.options_json.size() > limits::max_message_bytes)
    refuse(s.name, fmt::format("arguments and options are larger than {} bytes",
                               limits::max_message_bytes));
  try {
    validate_queue_name(s.queue);
  } catch (const error& e) {
    refuse(s.name, e.what());
  }
  if (!is_storable_json_text(s.args_json) || !json_is(s.args_json, rapidjson::kArrayType))
    refuse(s.name, fmt::format("arguments {} are not a JSON array", s.args_json));
  if (!is_storable_json_text(s.options_json) || !json_is(s.options_json, rapidjson::kObjectType))
    refuse(s.name, fmt::format("options {} are not a JSON object", s.options_json));
  if (auto fault = limits::check_message_options(s.options_json))
    refuse(s.name, "options: " + *fault);
  if (s.interval && !s.cron.empty())
    refuse(s.name, "give an interval or a cron expression, not both");
  if (!s.interval && s.cron.empty())
    refuse(s.name, "give an interval or a cron expression");
  if (s.interval && (s.interval->count() < 1 || s.interval->count() > max_interval_ms))
    refuse(s.name,
           fmt::format("interval {} ms is out of range (1 ms to 100 years)", s.interval->count()));
  if (!s.cron.empty()) {
    try {
      cron_schedule::parse(s.cron, s.time_zone);
    } catch (const error& e) {
      refuse(s.name, e.what());
    }
  }
  // An interval runs on the grid of its start, in absolute time: a time zone would change
  // nothing, so one other than UTC is refused rather than stored and ignored.
  if (s.interval && !s.time_zone.empty() && s.time_zone != "UTC")
    refuse(s.name, fmt::format("time zone \"{}\" applies to cron schedules only: an interval "
                               "runs on the grid of its start time",
                               s.time_zone));
  if (s.jitter.count() < 0 || s.jitter.count() > max_jitter_ms)
    refuse(s.name, fmt::format("jitter {} ms is out of range (0 to 1 day)", s.jitter.count()));
  if (s.start_at && ms_of(*s.start_at) < 0)
    refuse(s.name, "start time is before 1970");
}

std::int64_t first_occurrence(const cadence& c, std::int64_t start_ms) {
  if (c.interval_ms)
    return start_ms;
  return ms_of(cron_schedule::parse(c.cron, c.time_zone).next_after(at(start_ms - 1)));
}

std::int64_t next_occurrence(const cadence& c, std::int64_t occurrence_ms, std::int64_t now_ms) {
  if (c.interval_ms) {
    auto step = *c.interval_ms;
    auto behind = now_ms >= occurrence_ms ? (now_ms - occurrence_ms) / step : -1;
    return occurrence_ms + (behind + 1) * step;
  }
  return ms_of(
    cron_schedule::parse(c.cron, c.time_zone).next_after(at(std::max(now_ms, occurrence_ms))));
}

std::vector<std::int64_t> upcoming(const cadence& c, std::int64_t next_run_ms, int count) {
  std::vector<std::int64_t> out;
  if (count <= 0)
    return out;
  out.push_back(next_run_ms);
  if (c.interval_ms) {
    for (int i = 1; i < count; ++i)
      out.push_back(next_run_ms + i * *c.interval_ms);
    return out;
  }
  auto cron = cron_schedule::parse(c.cron, c.time_zone);
  for (int i = 1; i < count; ++i)
    out.push_back(ms_of(cron.next_after(at(out.back()))));
  return out;
}

} // namespace troupe::detail
