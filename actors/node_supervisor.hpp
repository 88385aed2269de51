// The node supervisor: the root of one worker node. It owns and monitors every other actor of
// the node, declared in one table (actors/node_children.cpp): how each is spawned, whether it
// is restarted or escalates when it dies, and the order of the graceful stop. A scheduler, a
// limiter or a metrics actor is one more row.
#pragma once

#include "actors/protocol.hpp"

#include <chrono>
#include <memory>

namespace troupe::actors {

/// Restarts of one child allowed within `restart_window` before the node gives up.
inline constexpr int max_restarts = 5;
inline constexpr std::chrono::seconds restart_window{60};

node_supervisor_actor spawn_node_supervisor(caf::actor_system& sys, node_options options,
                                            std::shared_ptr<const task_registry> tasks);

} // namespace troupe::actors
