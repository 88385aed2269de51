// The JSON reports of the operations' verbs (pause, cancel, failed, retry, ...).
#include "cli/output.hpp"

#include "troupe/json.hpp"

#include <fmt/format.h>

#include <ctime>

namespace troupe::cli {

namespace {

std::string nullable_string(const std::string& s) {
  return s.empty() ? std::string("null") : json_quote(s);
}

std::string boolean(bool b) {
  return b ? "true" : "false";
}

// A stored JSON value as it is, or null. Values come from the database's jsonb output, which
// is valid JSON.
std::string raw_json(const std::string& s) {
  return s.empty() ? std::string("null") : s;
}

} // namespace

std::string iso_time(std::int64_t unix_ms) {
  auto seconds = static_cast<std::time_t>(unix_ms >= 0 ? unix_ms / 1000 : (unix_ms - 999) / 1000);
  auto millis = static_cast<int>(unix_ms - static_cast<std::int64_t>(seconds) * 1000);
  std::tm tm{};
  gmtime_r(&seconds, &tm);
  return fmt::format("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z", tm.tm_year + 1900, tm.tm_mon + 1,
                     tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, millis);
}

std::string format_queue_control_json(const queue_control& q) {
  return R"({"queue":)" + json_quote(q.queue) + R"(,"paused":)" + boolean(q.paused) +
         R"(,"changed_at":)" +
         (q.changed_at_ms ? json_quote(iso_time(*q.changed_at_ms)) : std::string("null")) + "}";
}

std::string format_queue_controls_json(const std::vector<queue_control>& qs) {
  std::string out = R"({"queues":[)";
  for (std::size_t i = 0; i < qs.size(); ++i)
    out += (i > 0 ? "," : "") + format_queue_control_json(qs[i]);
  return out + "]}";
}

std::string format_cancel_json(const cancel_report& r) {
  return R"({"message_id":)" + json_quote(r.message_id) + R"(,"status":)" +
         json_quote(to_string(r.outcome)) + R"(,"state":)" + nullable_string(r.state) + "}";
}

std::string format_cancel_counts_json(const cancel_counts& c) {
  return R"({"cancelled":)" + std::to_string(c.cancelled) + R"(,"requested":)" +
         std::to_string(c.requested) + "}";
}

std::string format_cancel_state_json(const cancel_state& s) {
  return R"({"message_id":)" + json_quote(s.message_id) + R"(,"state":)" +
         nullable_string(s.state) + R"(,"requested":)" + boolean(s.requested) + "}";
}

std::string format_failed_json(const failed_message& m) {
  std::string out = R"({"message_id":)" + json_quote(m.message_id) + R"(,"queue":)" +
                    json_quote(m.queue) + R"(,"task":)" + json_quote(m.task) + R"(,"priority":)" +
                    std::to_string(m.priority) + R"(,"attempts":)" + std::to_string(m.attempts) +
                    R"(,"retries":)" + std::to_string(m.attempts > 0 ? m.attempts - 1 : 0) +
                    R"(,"error":)" + raw_json(m.error_json) + R"(,"enqueued_at":)" +
                    json_quote(iso_time(m.enqueued_at_ms)) + R"(,"finished_at":)" +
                    (m.finished_at_ms ? json_quote(iso_time(m.finished_at_ms)) : "null");
  if (m.args_json)
    out += R"(,"args":)" + *m.args_json;
  if (m.options_json)
    out += R"(,"options":)" + *m.options_json;
  return out + "}";
}

std::string format_failed_page_json(const failed_page& page) {
  std::string out = R"({"items":[)";
  for (std::size_t i = 0; i < page.items.size(); ++i)
    out += (i > 0 ? "," : "") + format_failed_json(page.items[i]);
  return out + R"(],"next_after":)" +
         (page.next_after ? json_quote(*page.next_after) : std::string("null")) + "}";
}

std::string format_retry_json(const retry_report& r) {
  return R"({"message_id":)" + json_quote(r.message_id) + R"(,"status":)" +
         json_quote(to_string(r.outcome)) + R"(,"state":)" + nullable_string(r.state) + "}";
}

} // namespace troupe::cli
