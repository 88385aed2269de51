// What a scenario reports and how the benchmark prints it: one result per scenario, printed as a
// human table or as one JSON object per line; percentiles; a progress display on stderr; and the
// resident memory of a process read from /proc.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace troupe::bench {

/// One scenario's figures. A key that does not apply stays empty (null in JSON).
struct scenario_result {
  std::string scenario;
  std::optional<std::int64_t> tasks;
  std::optional<double> seconds;
  std::optional<double> per_second;
  std::optional<double> p50_ms;
  std::optional<double> p99_ms;
  std::optional<double> peak_rss_mb;
  /// Scenario settings and secondary figures, as (key, JSON value text) in insertion order.
  std::vector<std::pair<std::string, std::string>> settings;
  /// Extra lines for the human output (plans, explanations).
  std::vector<std::string> notes;

  void set(std::string key, std::int64_t value);
  void set(std::string key, int value) { set(std::move(key), std::int64_t{value}); }
  void set(std::string key, double value);
  void set(std::string key, bool value);
  void set(std::string key, std::string_view value);
  void set(std::string key, const char* value) { set(std::move(key), std::string_view(value)); }
  /// The JSON text of setting `key`, or empty when there is none.
  std::string setting(std::string_view key) const;
};

/// The result as one line of JSON with every key of the schema (null where empty).
std::string to_json_line(const scenario_result& r);

/// The result as a short human block: a row of the main figures, then the settings and notes.
std::string to_human(const scenario_result& r);

/// The nearest-rank percentile `p` (0..100) of `values`, which it sorts. Empty for no values.
std::optional<double> percentile(std::vector<double>& values, double p);

/// Milliseconds between two steady-clock points.
double ms_between(std::chrono::steady_clock::time_point a, std::chrono::steady_clock::time_point b);

/// Resident memory of a process from /proc/PID/status, in MiB: the current (VmRSS) and the
/// peak (VmHWM). Empty when the process is gone. pid 0 means this process.
struct rss_reading {
  double current_mb = 0;
  double peak_mb = 0;
};
std::optional<rss_reading> read_rss(int pid = 0);
/// Resets this process's peak RSS (VmHWM) to its current RSS, so a scenario's peak is its own.
void reset_peak_rss();

/// CPU time so far: this process's (user + system) and the whole machine's busy time, in
/// seconds. The difference over a window is what PostgreSQL (and anything else) used.
struct cpu_sample {
  double process_s = 0;
  double machine_busy_s = 0;
};
cpu_sample sample_cpu();

/// Progress of a long step on stderr: a bar redrawn in place on a terminal, plain lines (at most
/// one every 2 s, and the last) otherwise. Owned and used by one thread.
class progress {
public:
  progress(std::string label, std::int64_t total);
  ~progress();
  progress(const progress&) = delete;
  progress& operator=(const progress&) = delete;

  /// Reports `done` of the total; cheap to call often (redraws are throttled).
  void update(std::int64_t done);
  /// Ends the display (a final line).
  void finish();

private:
  std::string label_;
  std::int64_t total_;
  std::int64_t last_done_ = -1;
  bool tty_;
  bool finished_ = false;
  std::chrono::steady_clock::time_point start_;
  std::chrono::steady_clock::time_point last_draw_;
};

} // namespace troupe::bench
