// The plain records the admin API returns (troupe/admin.hpp). Part of the shared base: storage
// reads them from the database, and the CLI, the dashboard and users' tools print them. No
// behaviour here.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace troupe {

/// How many messages of one queue are in each state (`troupe stats`).
struct queue_stats {
  std::string queue;
  std::int64_t queued = 0;
  std::int64_t running = 0;
  std::int64_t done = 0;
  std::int64_t failed = 0;
  std::int64_t cancelled = 0;
  /// Queued messages whose eta has passed, and those still waiting for it.
  std::int64_t ready = 0;
  std::int64_t scheduled = 0;
  /// How long the oldest ready message has waited since its eta; 0 when none is ready.
  double oldest_ready_seconds = 0;
};

/// A worker node in the area's registry.
struct node_status {
  std::int32_t node_id = 0;
  std::string name;
  std::string host;
  std::int32_t pid = 0;
  /// The queues it consumes.
  std::vector<std::string> queues;
  /// Unix time in milliseconds of its registration.
  std::int64_t started_at_ms = 0;
  /// Whether it holds its liveness lock now (a node whose session ended does not).
  bool alive = false;
};

/// What creating or upgrading an area did.
struct migration_report {
  /// The area's version before and after.
  int from_version = 0;
  int to_version = 0;
  /// The migrations applied, in order; empty when the area was up to date.
  std::vector<int> applied;
};

} // namespace troupe
