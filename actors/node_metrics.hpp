// A worker node's Prometheus metrics (docs/metrics.md): counters, gauges and histograms whose
// label sets are fixed when the node starts (its queues, its registered tasks, the outcomes),
// so that the hot path only adds to atomics: no lock, no allocation, no message. The node's
// actors record into it from their threads; the metrics endpoint's thread renders it. No CAF.
// Internal (not installed).
#pragma once

#include "storage/records.hpp"
#include "troupe/error.hpp"

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

namespace troupe::actors {

/// A histogram over fixed upper bounds: an atomic count per bucket, a sum and a count.
class histogram {
public:
  explicit histogram(std::vector<double> bounds);
  void observe(double value) noexcept;
  /// Appends the histogram's series (`name`_bucket, _sum, _count) with `labels` ("a=\"x\"", or
  /// empty) to `out`.
  void render(std::string& out, const std::string& name, const std::string& labels) const;

private:
  std::vector<double> bounds_;
  std::unique_ptr<std::atomic<std::uint64_t>[]> buckets_; // one per bound, then +Inf
  std::atomic<double> sum_{0.0};
};

/// Owned jointly by the node's actors and its metrics endpoint (shared_ptr); every member is
/// safe to call from any thread.
class node_metrics {
public:
  /// `queues`: the node's queues; `tasks`: its registered task names. A task outside them
  /// (an unregistered one, which fails) is counted under the label task="(unregistered)".
  node_metrics(std::string node_name, const std::vector<std::string>& queues,
               const std::vector<std::string>& tasks);
  ~node_metrics();

  /// The index of queue `name` (fixed; -1 when the node has no such queue).
  int queue_index(const std::string& name) const;

  /// An attempt of `task` on queue `q` started, `waited_ms` after its message became ready.
  void attempt_started(int q, const std::string& task, std::int64_t waited_ms) noexcept;
  /// An attempt of `task` on queue `q` ended with `state` after `ran_ms`.
  void attempt_finished(int q, const std::string& task, storage::outcome_state state,
                        std::int64_t ran_ms) noexcept;
  /// A claim of queue `q` returned `count` messages.
  void claimed(int q, std::size_t count) noexcept;
  /// What queue `q` runs and holds ready now.
  void set_load(int q, std::int64_t running, std::int64_t prefetched) noexcept;
  /// The completion batcher wrote `count` outcomes in one statement.
  void flushed(std::size_t count) noexcept;
  /// A storage request of the node failed with `kind`.
  void storage_error(errc kind) noexcept;

  /// The Prometheus text exposition (version 0.0.4) of every metric.
  std::string render() const;

private:
  struct series;
  std::string node_;
  std::vector<std::string> queues_;
  std::vector<std::string> tasks_; // registered, then "(unregistered)"
  std::unordered_map<std::string, int> task_index_;
  std::unique_ptr<series> s_;
  int task_of(const std::string& task) const noexcept;
};

} // namespace troupe::actors
