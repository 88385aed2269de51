// The scheduler (docs/scheduler.md): publishes the occurrences of an area's schedules. Any number
// may run on one area, in worker nodes ([schedules] enabled=true) or as `troupe scheduler`: each
// tick takes the due schedules with SKIP LOCKED and, in one transaction, publishes each
// occurrence through the deduplicated path and moves the schedule on, so every occurrence is
// published once. No CAF: the node's scheduler actor drives one of these on its own thread.
#pragma once

#include "troupe/area.hpp"
#include "troupe/schedule_records.hpp"

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace troupe {

/// How a scheduler connects and ticks.
struct scheduler_options {
  /// libpq connection string or URI; empty means libpq's PG* environment variables.
  std::string dsn;
  troupe::area area;
  /// How often run() ticks (a tick that found a full batch ticks again at once). 10 ms to 1 h.
  std::chrono::milliseconds poll{1000};
  /// Schedules one tick takes at most (1 to 1,000).
  std::int32_t batch = 100;
  std::string application_name = "troupe-scheduler";
  /// The "now" of a tick: the database's clock unless set (tests inject one).
  std::function<std::chrono::system_clock::time_point()> clock;
  /// For tests of crash safety: called after a tick published its occurrences and before it
  /// commits (a process that ends here leaves every occurrence due and nothing published).
  std::function<void()> before_commit;
};

/// Throws troupe::error(invalid_argument) naming a bad value of `o` (poll, batch, the area).
void validate_scheduler_options(const scheduler_options& o);

/// One scheduler. Owns one connection; not thread-safe (one caller at a time).
class scheduler {
public:
  /// Validates `options`; does not connect.
  explicit scheduler(scheduler_options options);
  ~scheduler();
  scheduler(const scheduler&) = delete;
  scheduler& operator=(const scheduler&) = delete;

  /// One tick, one transaction: what it did with each due occurrence (published, skipped for
  /// overlap, missed under catch-up none). A lost connection is reopened by the next tick; an
  /// error rolls the tick back (the occurrences stay due) and propagates.
  std::vector<schedule_occurrence> tick();

  /// Ticks every poll until `stop` holds (checked at least every 100 ms; a tick in progress
  /// finishes). `on_tick` (if set) gets each tick's occurrences; `on_error` each failed tick's
  /// text, after which it waits one poll and goes on (without on_error, the error propagates).
  /// Returns how many occurrences it published.
  std::int64_t run(const std::atomic<bool>& stop,
                   const std::function<void(const std::vector<schedule_occurrence>&)>& on_tick = {},
                   const std::function<void(const std::string&)>& on_error = {});

private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

} // namespace troupe
