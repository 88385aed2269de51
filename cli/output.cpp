#include "cli/output.hpp"

#include "troupe/json.hpp"
#include "troupe/log.hpp"

#include <charconv>
#include <cmath>
#include <string_view>

namespace troupe::cli {

namespace {

/// The five states in the order every report lists them (the queue table's enum order).
struct state_count {
  std::string_view state;
  std::int64_t count;
};

std::vector<state_count> counts_of(const queue_stats& s) {
  return {{"queued", s.queued},
          {"running", s.running},
          {"done", s.done},
          {"failed", s.failed},
          {"cancelled", s.cancelled}};
}

} // namespace

std::string terminal_safe(std::string_view text) {
  return loggable(text, text.size());
}

std::string describe_area(const area& a) {
  // Schema and prefix are validated identifiers ([a-z0-9_]), so they need no escaping here.
  return "schema " + a.schema + " (prefix \"" + a.prefix + "\")";
}

std::string describe_area_short(const area& a) {
  return a.prefix.empty() ? "schema " + a.schema : describe_area(a);
}

std::string format_seconds(double seconds) {
  if (!std::isfinite(seconds) || seconds <= 0)
    return "0";
  double rounded = std::round(seconds * 1000) / 1000;
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, rounded, std::chars_format::fixed);
  if (ec != std::errc{})
    return "0";
  return std::string(buf, end);
}

std::string format_stats_text(const std::vector<queue_stats>& stats) {
  if (stats.empty())
    return "no queues with messages\n";
  std::string out;
  for (const auto& s : stats) {
    if (!out.empty())
      out += '\n';
    // A queue name is whatever a row holds: a newline or an escape sequence in it must not
    // forge a line or reach the terminal.
    out += "queue " + terminal_safe(s.queue) + '\n';
    for (const auto& [state, count] : counts_of(s))
      out += "  " + std::string(state) + ": " + std::to_string(count) + '\n';
    out += "  ready: " + std::to_string(s.ready) + '\n';
    out += "  scheduled: " + std::to_string(s.scheduled) + '\n';
    out += "  oldest_ready_seconds: " + format_seconds(s.oldest_ready_seconds) + '\n';
  }
  return out;
}

std::string format_stats_json(const std::vector<queue_stats>& stats) {
  std::string out = R"({"queues":[)";
  for (std::size_t i = 0; i < stats.size(); ++i) {
    const auto& s = stats[i];
    if (i > 0)
      out += ',';
    out += R"({"queue":)" + json_quote(s.queue) + R"(,"counts":{)";
    bool first = true;
    for (const auto& [state, count] : counts_of(s)) {
      if (!first)
        out += ',';
      first = false;
      out += json_quote(state) + ':' + std::to_string(count);
    }
    out += R"(},"ready":)" + std::to_string(s.ready);
    out += R"(,"scheduled":)" + std::to_string(s.scheduled);
    out += R"(,"oldest_ready_seconds":)" + format_seconds(s.oldest_ready_seconds) + '}';
  }
  out += "]}\n";
  return out;
}

std::string format_migration_json(const area& a, std::optional<int> from, int version,
                                  const std::vector<int>& applied) {
  std::string out = R"({"schema":)" + json_quote(a.schema) + R"(,"prefix":)" + json_quote(a.prefix);
  if (from)
    out += R"(,"from":)" + std::to_string(*from);
  out += R"(,"version":)" + std::to_string(version) + R"(,"applied":[)";
  for (std::size_t i = 0; i < applied.size(); ++i) {
    if (i > 0)
      out += ',';
    out += std::to_string(applied[i]);
  }
  out += "]}\n";
  return out;
}

} // namespace troupe::cli
