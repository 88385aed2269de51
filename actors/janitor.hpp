// The janitor: finds dead nodes (liveness lock free) and puts their running messages back.
#pragma once

#include "actors/protocol.hpp"
#include "storage/records.hpp"
#include "storage/statements.hpp"

#include <chrono>

namespace troupe::actors {

struct janitor_settings {
  storage_actor storage;
  std::chrono::milliseconds interval{2000};
  /// How long a node's lock must stay free before the node counts as dead.
  std::chrono::milliseconds dead_node_grace{3000};
  /// A storage actor of the janitor's own for vacuums, which may take a while: it must not
  /// hold up the pool's claims and writes. Linked to the janitor, so it goes with it.
  storage_actor upkeep;
  /// Vacuum the queue table past this many dead row versions (plus 2 % of its live rows);
  /// 0 never (nor without `upkeep`).
  std::int32_t vacuum_dead_rows = 0;
  /// How long finished rows are kept per state (0: forever); each pass purges up to 1,000 of
  /// each state past its window (areas from migration 5 on).
  storage::retention keep;
  /// The area's statements: their version says whether the area has what retention needs.
  storage::statement_set_ptr statements;
};

/// Spawns the janitor. Its first pass runs at once, then every interval (jittered by 10 %); a
/// pass never starts while the previous one is still running. Each pass also asks `upkeep` to
/// vacuum the queue table if it needs it, unless a vacuum is still running.
janitor_actor spawn_janitor(caf::actor_system& sys, janitor_settings settings);

} // namespace troupe::actors
