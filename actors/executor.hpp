// Executors: where task code runs. Each executor is a thread of its own (task code may block),
// serving one slot of one consumer. No CAF here: the consumer hands an executor messages with
// run(), and the executor reports each finished attempt through the callback it was given.
//
// Executors are threads of Troupe's own, not CAF actors, so that an attempt abandoned past its
// time limit never holds up its node's stop or its actor system's shutdown: the consumer
// abandons the executor, and the thread goes on with the task until the task returns, then
// ends without reporting (see docs/middleware.md, "Time limits").
#pragma once

#include "actors/attempt_board.hpp"
#include "storage/records.hpp"
#include "troupe/task.hpp"

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace troupe::actors {

/// One executor, owned by its consumer. Tickets count up per slot, one per message sent; the
/// executor starts a message only by moving the slot's gate from the ticket before it to its
/// own (a compare-and-swap), so the consumer takes back what was sent but not started by moving
/// the gate past every ticket it sent (executor_slots::take_back).
class executor {
public:
  virtual ~executor() = default;

  /// Queues `msgs` to run in order behind what the executor has; the first holds ticket
  /// `first`, the next ones follow it.
  virtual void run(std::vector<storage::claimed_message> msgs, std::uint64_t first) = 0;

  /// Whether a task is running now (an abandoned executor counts as stuck until it returns).
  virtual bool busy() const noexcept = 0;

  /// Gives the executor up: it reports nothing from now on and starts nothing more; its thread
  /// ends once the task at hand (if any) returns. Called by the consumer when the executor is
  /// abandoned, and when the consumer ends. Idempotent.
  virtual void abandon() noexcept = 0;
};

/// Everything a real executor needs to run tasks.
struct executor_context {
  std::shared_ptr<const task_registry> registry;
  std::string queue;
  /// Turns true when the node stops; tasks that asked see it through their task_context.
  std::shared_ptr<const std::atomic<bool>> stopping;
  /// The consumer's cancel requests and its tasks' progress; each attempt's task_context reads
  /// its own cancel flag and reports its progress there.
  std::shared_ptr<attempt_board> cancels;
  /// The node's limiter port, for its tasks' limit guards (task_context::coordination).
  std::shared_ptr<coordination_port> coordination;
};

/// Where an executor reports an attempt's outcome. Called on the executor's thread, never
/// after abandon() has returned.
using report_outcome = std::function<void(storage::outcome)>;

/// Makes the executor of a slot: given the slot's gate and where to report. The consumer's
/// default starts a thread per executor (thread_executor); tests pass their own.
using executor_factory = std::function<std::unique_ptr<executor>(
  std::shared_ptr<std::atomic<std::uint64_t>> gate, report_outcome report)>;

/// The factory of executors that run the tasks of `context` each on a thread of its own.
executor_factory thread_executors(executor_context context);

} // namespace troupe::actors
