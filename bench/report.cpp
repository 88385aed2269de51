#include "report.hpp"

#include <troupe/json.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>

#include <sys/resource.h>
#include <unistd.h>

namespace troupe::bench {

namespace {

std::string number_json(double v) {
  if (!std::isfinite(v))
    return "null";
  return fmt::format("{:.6g}", v);
}

template <class T>
std::string optional_json(const std::optional<T>& v) {
  if (!v)
    return "null";
  if constexpr (std::is_integral_v<T>)
    return std::to_string(*v);
  else
    return number_json(*v);
}

std::string human_number(const std::optional<double>& v, int decimals) {
  return v ? fmt::format("{:.{}f}", *v, decimals) : std::string("-");
}

} // namespace

void scenario_result::set(std::string key, std::int64_t value) {
  settings.emplace_back(std::move(key), std::to_string(value));
}

void scenario_result::set(std::string key, double value) {
  settings.emplace_back(std::move(key), number_json(value));
}

void scenario_result::set(std::string key, bool value) {
  settings.emplace_back(std::move(key), value ? "true" : "false");
}

void scenario_result::set(std::string key, std::string_view value) {
  settings.emplace_back(std::move(key), json_quote(value));
}

std::string scenario_result::setting(std::string_view key) const {
  for (const auto& [k, v] : settings)
    if (k == key)
      return v;
  return {};
}

std::string to_json_line(const scenario_result& r) {
  std::string settings = "{";
  for (std::size_t i = 0; i < r.settings.size(); ++i)
    settings +=
      fmt::format("{}{}: {}", i ? ", " : "", json_quote(r.settings[i].first), r.settings[i].second);
  settings += "}";
  return fmt::format("{{\"scenario\": {}, \"tasks\": {}, \"seconds\": {}, \"per_second\": {}, "
                     "\"p50_ms\": {}, \"p99_ms\": {}, \"peak_rss_mb\": {}, \"settings\": {}}}",
                     json_quote(r.scenario), optional_json(r.tasks), optional_json(r.seconds),
                     optional_json(r.per_second), optional_json(r.p50_ms), optional_json(r.p99_ms),
                     optional_json(r.peak_rss_mb),
                     r.settings.empty() ? std::string("null") : settings);
}

std::string to_human(const scenario_result& r) {
  std::string out = fmt::format("{:<18} {:>10} {:>9} {:>11} {:>9} {:>9} {:>9}\n", "scenario",
                                "tasks", "seconds", "per second", "p50 ms", "p99 ms", "peak MB");
  out +=
    fmt::format("{:<18} {:>10} {:>9} {:>11} {:>9} {:>9} {:>9}\n", r.scenario,
                r.tasks ? std::to_string(*r.tasks) : std::string("-"), human_number(r.seconds, 2),
                human_number(r.per_second, 0), human_number(r.p50_ms, 3), human_number(r.p99_ms, 3),
                human_number(r.peak_rss_mb, 1));
  for (const auto& [k, v] : r.settings)
    out += fmt::format("  {:<28} {}\n", k, v);
  for (const auto& line : r.notes)
    out += "  " + line + "\n";
  return out;
}

std::optional<double> percentile(std::vector<double>& values, double p) {
  if (values.empty())
    return std::nullopt;
  std::sort(values.begin(), values.end());
  auto rank = static_cast<std::size_t>(std::ceil(p / 100.0 * static_cast<double>(values.size())));
  rank = std::clamp<std::size_t>(rank, 1, values.size());
  return values[rank - 1];
}

double ms_between(std::chrono::steady_clock::time_point a,
                  std::chrono::steady_clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

std::optional<rss_reading> read_rss(int pid) {
  std::ifstream in(pid == 0 ? std::string("/proc/self/status")
                            : fmt::format("/proc/{}/status", pid));
  if (!in)
    return std::nullopt;
  rss_reading r;
  bool seen = false;
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream words(line);
    std::string key;
    double kb = 0;
    words >> key >> kb;
    if (key == "VmRSS:") {
      r.current_mb = kb / 1024.0;
      seen = true;
    } else if (key == "VmHWM:") {
      r.peak_mb = kb / 1024.0;
    }
  }
  if (!seen)
    return std::nullopt;
  return r;
}

void reset_peak_rss() {
  std::ofstream out("/proc/self/clear_refs");
  out << "5";
}

cpu_sample sample_cpu() {
  cpu_sample c;
  rusage ru{};
  if (getrusage(RUSAGE_SELF, &ru) == 0)
    c.process_s = static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
                  static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
  std::ifstream stat("/proc/stat");
  std::string cpu;
  double user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0, steal = 0;
  stat >> cpu >> user >> nice >> system >> idle >> iowait >> irq >> softirq >> steal;
  auto hz = static_cast<double>(::sysconf(_SC_CLK_TCK));
  c.machine_busy_s = (user + nice + system + irq + softirq + steal) / hz;
  return c;
}

progress::progress(std::string label, std::int64_t total)
    : label_(std::move(label)), total_(std::max<std::int64_t>(total, 1)),
      tty_(::isatty(STDERR_FILENO) == 1), start_(std::chrono::steady_clock::now()),
      last_draw_(start_) {}

progress::~progress() {
  finish();
}

void progress::update(std::int64_t done) {
  if (finished_ || done == last_done_)
    return;
  auto now = std::chrono::steady_clock::now();
  last_done_ = done;
  double seconds = std::chrono::duration<double>(now - start_).count();
  if (tty_) {
    if (now - last_draw_ < std::chrono::milliseconds(100) && done < total_)
      return;
    last_draw_ = now;
    constexpr int width = 30;
    int filled = static_cast<int>(std::min<std::int64_t>(done * width / total_, width));
    std::fprintf(stderr, "\r  %-14s [%s%s] %3d%%  %lld/%lld  %.1f s", label_.c_str(),
                 std::string(static_cast<std::size_t>(filled), '#').c_str(),
                 std::string(static_cast<std::size_t>(width - filled), '.').c_str(),
                 static_cast<int>(done * 100 / total_), static_cast<long long>(done),
                 static_cast<long long>(total_), seconds);
    std::fflush(stderr);
    return;
  }
  // Plain lines: at most one every 2 s, and the last one.
  if (done >= total_ || now - last_draw_ >= std::chrono::seconds(2)) {
    last_draw_ = now;
    std::fprintf(stderr, "  %s: %lld/%lld (%.1f s)\n", label_.c_str(), static_cast<long long>(done),
                 static_cast<long long>(total_), seconds);
  }
}

void progress::finish() {
  if (finished_)
    return;
  finished_ = true;
  if (tty_ && last_done_ >= 0)
    std::fprintf(stderr, "\n");
}

} // namespace troupe::bench
