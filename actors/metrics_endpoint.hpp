// A worker node's metrics endpoint ([metrics], docs/metrics.md): the node's counters and the
// HTTP server that renders them on GET /metrics, on a thread of its own. No CAF.
// Internal (not installed).
#pragma once

#include "actors/node_metrics.hpp"
#include "http/http_server.hpp"

#include <troupe/node_options.hpp>
#include <troupe/task.hpp>

#include <memory>
#include <string>

namespace troupe::actors {

/// What a node with [metrics] enabled records into, and the endpoint serving it (both empty
/// when it is off).
struct metrics_endpoint {
  std::shared_ptr<node_metrics> metrics;
  std::shared_ptr<http::server> server;
};

/// Starts the endpoint of node `node_name` when `options.metrics.enabled`, with a series for
/// each of its queues and of `tasks`' names. Called before the node exists, so that an address
/// that cannot be bound is the spawn's error: troupe::error(invalid_argument) naming it.
metrics_endpoint start_metrics_endpoint(const node_options& options, const task_registry* tasks,
                                        const std::string& node_name);

} // namespace troupe::actors
