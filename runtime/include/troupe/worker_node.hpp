// A worker node as a program: its own actor system, signal handling, and a graceful stop.
// No CAF in this header; applications with their own actor system use <troupe/caf.hpp>.
#pragma once

#include "troupe/node_options.hpp"
#include "troupe/task.hpp"

#include <memory>

namespace troupe {

/// What a finished run reports.
struct run_summary {
  /// 0 after a graceful stop; 1 when the node failed and could not go on.
  int exit_code = 0;
  std::int64_t executed = 0;
  std::int64_t released = 0;
  std::int64_t abandoned = 0;
};

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
  /// prefetched messages go back, outcomes are flushed, the node deregisters. When tasks
  /// outlive the grace period the process cannot wait for their threads: it logs them and
  /// ends with std::_Exit(0) (their messages are recovered by any live node's janitor).
  run_summary run();

  /// Asks a running run() to stop, as a signal would. Thread-safe.
  void request_stop();

private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

} // namespace troupe
