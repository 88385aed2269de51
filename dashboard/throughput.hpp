// The throughput chart's numbers: finished messages per second of each queue between two
// samples of the area's counts (done + failed + cancelled), kept in a bounded ring. Plain
// values, no connection, so that the arithmetic is tested on its own.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace troupe::dashboard {

class throughput_history {
public:
  /// Keeps the last `capacity` samples (at least 2).
  explicit throughput_history(std::size_t capacity);

  /// Records each queue's finished total, read at Unix time `at_ms` (increasing).
  void record(std::int64_t at_ms, std::map<std::string, std::int64_t> finished);

  struct point {
    /// The end of the interval, and its length.
    std::int64_t at_ms = 0;
    std::int64_t length_ms = 0;
    /// Messages finished in the interval, by queue. None when the total went down (rows were
    /// purged in it): that interval's count cannot be told.
    std::map<std::string, std::optional<std::int64_t>> finished;
  };
  /// One point per interval between consecutive samples, oldest first. A queue absent from
  /// the earlier sample counts from zero (its first messages finished in the interval); one
  /// absent from the later sample (all its rows purged) has no rate.
  std::vector<point> points() const;

  /// `{"interval_ms":N,"points":[{"at":ISO,"finished":{"q":15,"r":null},
  /// "per_second":{"q":1.5,"r":null}}]}`.
  std::string json(std::int64_t interval_ms) const;

private:
  std::size_t capacity_;
  std::deque<std::pair<std::int64_t, std::map<std::string, std::int64_t>>> samples_;
};

} // namespace troupe::dashboard
