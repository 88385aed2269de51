// The completion batcher: collects the outcomes of a node's attempts and writes them in one
// statement per flush, checked against the owning node and delivery token.
#pragma once

#include "troupe/protocol.hpp"

#include <chrono>

namespace troupe::actors {

struct batcher_settings {
  std::int32_t node_id = 0;
  storage_actor storage;
  /// Write at most this long after the first unwritten outcome arrived...
  std::chrono::milliseconds flush_interval{2};
  /// ...or as soon as this many are held.
  std::int32_t batch_size = 500;
};

/// Spawns the batcher. One flush is in flight at a time; what arrives meanwhile forms the next
/// batch. A failed write keeps its outcomes and tries again with backoff: nothing is dropped.
batcher_actor spawn_completion_batcher(caf::actor_system& sys, batcher_settings settings);

} // namespace troupe::actors
