// A worker node as a program: its own actor system, signal handling, and a graceful stop.
// No CAF in this header; applications with their own actor system use <troupe/caf.hpp>.
#pragma once

#include "troupe/middleware.hpp"
#include "troupe/node_options.hpp"
#include "troupe/task.hpp"

#include <future>
#include <memory>

namespace troupe {

/// What a finished run reports.
struct run_summary {
  /// 0 after a graceful stop; 1 when the node failed and could not go on.
  int exit_code = 0;
  std::int64_t executed = 0;
  std::int64_t released = 0;
  /// Tasks still running when the shutdown grace ran out, and tasks of attempts abandoned past
  /// their time limit that had not returned yet: their threads are still running.
  std::int64_t abandoned = 0;
};

/// Refuses (troupe::error(invalid_argument), naming the queue) a configured queue that no task
/// in `tasks` runs on: its messages could only fail as unknown tasks. A task runs on its
/// task_ref's queue and on its task_options::also_queues. worker_node and spawn_worker_node
/// call it.
void check_queues_served(const node_options& options, const task_registry& tasks);

/// Runs one worker node in this process until SIGTERM or SIGINT (or request_stop()).
class worker_node {
public:
  /// Throws troupe::error(invalid_argument) for bad options.
  worker_node(node_options options, task_registry tasks);
  ~worker_node();
  worker_node(const worker_node&) = delete;
  worker_node& operator=(const worker_node&) = delete;

  /// Blocks SIGTERM and SIGINT in this thread (and in the threads it starts), starts the node
  /// and returns after a graceful stop: claiming stops, running tasks get the grace period,
  /// prefetched messages go back, outcomes are flushed, the node deregisters, and its actor
  /// system shuts down. Tasks that outlive the grace period are abandoned: their messages are
  /// recovered by any live node's janitor, and their threads go on until the task returns (or
  /// the process ends), reporting nothing: when `abandoned` is above 0, end the process with
  /// std::_Exit rather than return from main (docs/guide.md, "Stopping a node with tasks still
  /// running").
  run_summary run();

  /// Asks a running run() to stop, as a signal would. Thread-safe.
  void request_stop();

  /// Becomes ready once the node has registered and its consumers are claiming, holding the
  /// node's id and name; holds a troupe::error when the node stops or fails before. For code on
  /// another thread that must not publish (or test) before a node is there. Thread-safe.
  std::shared_future<node_info> ready() const;

private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

} // namespace troupe
