// The node's scheduler ([schedules] enabled=true; docs/scheduler.md): a detached actor that owns
// a troupe::scheduler (its own connection) and ticks it every poll.
#pragma once

#include "actors/protocol.hpp"
#include "troupe/scheduler.hpp"

namespace troupe::actors {

/// Spawns it, detached (its ticks block on the database). It ticks at once, then every poll
/// (at once again after a full batch). A tick that fails is logged and retried a poll later; an
/// exit waits for the tick in progress, whose transaction then commits or rolls back whole.
schedule_publisher_actor spawn_schedule_publisher(caf::actor_system& sys,
                                                  scheduler_options options);

} // namespace troupe::actors
