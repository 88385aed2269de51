// The node supervisor: the root of one worker node. It owns and monitors every other actor of
// the node, restarts the listener and consumers when they die, escalates when the storage
// pool, the batcher or the janitor dies (the node stops; its messages are recovered by the
// janitors of live nodes), and runs the graceful stop.
#pragma once

#include "troupe/caf.hpp"

namespace troupe::actors {

/// Restarts of one child allowed within `restart_window` before the node gives up.
inline constexpr int max_restarts = 5;
inline constexpr std::chrono::seconds restart_window{60};

node_actor spawn_node_supervisor(caf::actor_system& sys, node_options options,
                                 std::shared_ptr<const task_registry> tasks);

} // namespace troupe::actors
