#include "dashboard/throughput.hpp"

#include "cli/output.hpp"
#include "troupe/json.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace troupe::dashboard {

throughput_history::throughput_history(std::size_t capacity)
    : capacity_(std::max<std::size_t>(capacity, 2)) {}

void throughput_history::record(std::int64_t at_ms, std::map<std::string, std::int64_t> finished) {
  if (!samples_.empty() && at_ms <= samples_.back().first)
    return;
  samples_.emplace_back(at_ms, std::move(finished));
  while (samples_.size() > capacity_)
    samples_.pop_front();
}

std::vector<throughput_history::point> throughput_history::points() const {
  std::vector<point> out;
  for (std::size_t i = 1; i < samples_.size(); ++i) {
    const auto& [t0, before] = samples_[i - 1];
    const auto& [t1, after] = samples_[i];
    point p;
    p.at_ms = t1;
    p.length_ms = t1 - t0;
    for (const auto& [queue, n] : after) {
      auto was = before.find(queue);
      std::int64_t from = was == before.end() ? 0 : was->second;
      if (n < from)
        p.finished[queue] = std::nullopt;
      else
        p.finished[queue] = n - from;
    }
    for (const auto& [queue, n] : before)
      if (!after.count(queue))
        p.finished[queue] = std::nullopt;
    out.push_back(std::move(p));
  }
  return out;
}

std::string throughput_history::json(std::int64_t interval_ms) const {
  std::string out = fmt::format(R"({{"interval_ms":{},"points":[)", interval_ms);
  bool first_point = true;
  for (const auto& p : points()) {
    out += first_point ? "" : ",";
    first_point = false;
    double seconds = static_cast<double>(p.length_ms) / 1000.0;
    std::string counts, rates;
    for (const auto& [queue, n] : p.finished) {
      auto sep = counts.empty() ? "" : ",";
      counts += sep + json_quote(queue) + ":" + (n ? std::to_string(*n) : std::string("null"));
      rates += sep + json_quote(queue) + ":" +
               (n ? fmt::format("{:.3f}", static_cast<double>(*n) / seconds) : std::string("null"));
    }
    out += R"({"at":)" + json_quote(cli::iso_time(p.at_ms)) + R"(,"finished":{)" + counts +
           R"(},"per_second":{)" + rates + "}}";
  }
  return out + "]}";
}

} // namespace troupe::dashboard
