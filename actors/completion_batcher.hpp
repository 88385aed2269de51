// The completion batcher: collects the outcomes of a node's attempts and writes them in one
// statement per flush, checked against the owning node and delivery token.
#pragma once

#include "actors/node_metrics.hpp"
#include "actors/protocol.hpp"

#include <chrono>

namespace troupe::actors {

struct batcher_settings {
  std::int32_t node_id = 0;
  storage_actor storage;
  /// Write at most this long after the first unwritten outcome arrived...
  std::chrono::milliseconds flush_interval{2};
  /// ...or as soon as this many are held.
  std::int32_t batch_size = 500;
  /// Where it counts its batch sizes (none: not counted).
  std::shared_ptr<node_metrics> metrics;
};

/// Spawns the batcher. One flush is in flight at a time; what arrives meanwhile forms the next
/// batch. A write that fails for a lost connection is retried with backoff. When the database
/// refuses a batch for another reason, its outcomes are written one by one; an outcome it still
/// refuses is replaced by a failure record saying why. A flush request is answered once every
/// outcome received before it is settled (written, or refused as no longer owned), however
/// busy the batcher stays. Outcomes still held when the node is stopped are lost; their
/// messages are then recovered and run again by a live node.
batcher_actor spawn_completion_batcher(caf::actor_system& sys, batcher_settings settings);

} // namespace troupe::actors
