// Troupe's test kit, for your own tests of code that publishes and runs tasks: a throwaway area
// in a test database (or a private PostgreSQL cluster), a task run inline with a fake context,
// assertions on what was enqueued, and a queue drained by a real worker node. Works with any
// test framework: a failed expectation throws troupe::testing::expectation_failed.
//
//   troupe::testing::test_area area;                        // TROUPE_TEST_DSN, a fresh schema
//   my_code_that_publishes(area.client());
//   troupe::testing::require_enqueued(area, shop::send_email("ada@example.com"));
//   auto report = troupe::testing::drain(area, tasks);     // a real node runs the queue
//   CHECK(report.done == 1);
//
// Link troupe::testing (it brings troupe::node). No CAF in this header.
#pragma once

#include "troupe/admin.hpp"
#include "troupe/client.hpp"
#include "troupe/json.hpp"
#include "troupe/message.hpp"
#include "troupe/node_options.hpp"
#include "troupe/task.hpp"

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace troupe::testing {

/// Thrown by the require_ functions when what they expect does not hold. Its text says what
/// was expected and what was found.
class expectation_failed : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

/// A PostgreSQL cluster of the test's own, in a temporary folder: initdb, then a server on a
/// unix socket in that folder (no TCP port to clash with), stopped and removed on destruction.
/// Needs Debian's postgresql package (the newest installed server is used). Run as root, the
/// server runs as the `postgres` user. Throws troupe::error(connection_lost) with the server
/// log's tail when it cannot start, and troupe::error(not_found) when no server is installed.
class private_cluster {
public:
  private_cluster();
  ~private_cluster();
  private_cluster(const private_cluster&) = delete;
  private_cluster& operator=(const private_cluster&) = delete;

  /// Its connection string (host=<folder> port=5432 user=postgres dbname=postgres).
  const std::string& dsn() const noexcept;

private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

/// A throwaway area: a schema of its own (a random name, t_ and 12 hex digits) in the database
/// of a DSN, created at the latest version on construction and dropped with everything in it on
/// destruction. Areas of different tests never meet, so tests may run side by side.
class test_area {
public:
  /// In the database of TROUPE_TEST_DSN. Throws troupe::error(invalid_argument) naming the
  /// variable when it is unset or empty.
  test_area();
  /// In the database of `dsn` (a private_cluster's, say).
  explicit test_area(const std::string& dsn);
  ~test_area();
  test_area(const test_area&) = delete;
  test_area& operator=(const test_area&) = delete;

  const std::string& dsn() const noexcept { return dsn_; }
  const troupe::area& where() const noexcept { return where_; }

  /// A producer on this area (made on first use).
  troupe::client& client();
  /// The operations API on this area (made on first use): states, cancels, failures, stats.
  troupe::admin& admin();
  /// Settings of a worker node on this area running `queues` (each with concurrency 4), for
  /// tests that start a node of their own.
  node_options node_settings(const std::vector<std::string>& queues = {"default"}) const;

private:
  std::string dsn_;
  troupe::area where_;
  std::unique_ptr<troupe::client> client_;
  std::unique_ptr<troupe::admin> admin_;
};

/// What a task run inline sees in its task_context.
struct fake_context {
  std::string message_id; ///< empty: the message's id
  std::string queue;      ///< empty: the message's queue
  std::int32_t attempt = 1;
  std::int32_t priority = 0;
  /// The attempt's time limit, from the start of the run.
  std::chrono::milliseconds time_limit{600'000};
  /// As if the message's cancel had been requested before the run.
  bool cancel_requested = false;
  /// As if the node were stopping; seen only with notify_shutdown.
  bool shutting_down = false;
  bool notify_shutdown = false;
};

/// What a task run inline gave.
struct inline_run {
  /// The result as JSON text ("null" for a void task).
  std::string result_json;
  /// Every set_progress value the task reported, in order, as JSON text.
  std::vector<std::string> progress;

  /// The result decoded as `T`. Throws troupe::error(decode_failed) when it does not fit.
  template <class T>
  T result() const {
    return decode_value<T>(result_json);
  }
};

/// Runs the task of message `m` (built by calling a task_ref) with the implementation `tasks`
/// holds, on the calling thread, as one attempt: the arguments go through JSON as they would
/// through the queue, and `ctx` stands for the node's context. No middleware runs and nothing
/// touches a database (a limit guard needs a node: it throws). Throws what the task throws,
/// troupe::error(unknown_task) when `tasks` has no such task, and troupe::error(decode_failed)
/// when the arguments do not fit it.
inline_run run_inline(const task_registry& tasks, const message& m, const fake_context& ctx = {});

/// A message in the queue table, as a test sees it.
struct enqueued_message {
  std::string id;
  std::string queue;
  std::string task;
  std::string args_json;
  std::string options_json;
  std::int32_t priority = 0;
  /// queued, running, done, failed or cancelled.
  std::string state;
  /// Milliseconds from now until it may run (negative: it may run now).
  std::int64_t runs_in_ms = 0;
};

/// Which messages an expectation is about. Unset fields match anything.
struct enqueued_filter {
  std::optional<std::string> task;
  std::optional<std::string> queue;
  /// The arguments, compared as JSON values (jsonb equality: key order and spacing aside).
  std::optional<std::string> args_json;
  /// A JSON object the message's options must contain (jsonb @>), e.g. {"max_retries": 3}.
  std::optional<std::string> options_json;
  std::optional<std::int32_t> priority;
  /// The row states that count as enqueued: by default those not started yet.
  std::vector<std::string> states{"queued"};

  /// Matches messages of `m`'s task, queue and arguments (the message a task_ref call makes).
  static enqueued_filter like(const message& m);
};

/// The messages of `area` that match `filter`, oldest first (at most 1,000).
std::vector<enqueued_message> all_enqueued(const test_area& area,
                                           const enqueued_filter& filter = {});

/// Throws expectation_failed unless a message matching `filter` is enqueued; its text describes
/// the filter and lists (up to 10 of) the messages there are. Returns the first match.
enqueued_message require_enqueued(const test_area& area, const enqueued_filter& filter);
/// The same for enqueued_filter::like(m).
enqueued_message require_enqueued(const test_area& area, const message& m);
/// Throws expectation_failed when a message matching `filter` is enqueued, naming it.
void require_not_enqueued(const test_area& area, const enqueued_filter& filter);
void require_not_enqueued(const test_area& area, const message& m);

/// How drain runs.
struct drain_options {
  /// The queues to run; empty: every queue `tasks` names.
  std::vector<std::string> queues;
  /// Executors per queue.
  std::int32_t concurrency = 4;
  /// Also run messages whose time has not come (delayed ones and retries waiting for their
  /// backoff): their eta is moved to now, again each time the queue is looked at, so that a
  /// failing task runs through all its retries.
  bool with_scheduled = false;
  /// How long the drain waits for the queues before it throws expectation_failed (the node's
  /// graceful stop comes on top: up to its shutdown grace, 30 s, for tasks still running).
  std::chrono::milliseconds timeout{60'000};
};

/// What a drain did, and what is left.
struct drain_report {
  /// Attempts the node finished.
  std::int64_t attempts = 0;
  /// Rows of the drained queues by state once the drain ended.
  std::int64_t done = 0;
  std::int64_t failed = 0;
  std::int64_t cancelled = 0;
  /// Messages whose time has not come (delayed, or a retry after its backoff), left queued.
  std::int64_t scheduled = 0;
  /// Attempts abandoned past their time limit whose task had not returned when the node
  /// stopped: their threads still run (see docs/middleware.md, "Abandonment").
  std::int64_t abandoned = 0;
};

/// Runs the queues of `options` with a real worker node (in an actor system of its own, on
/// this area, with the registry's middleware) until none of their messages may run now or
/// runs, including the follow-ups (callbacks, pipeline steps) those publish to these queues;
/// then stops the node gracefully and reports. Throws expectation_failed after options.timeout, and
/// troupe::error(invalid_argument) for a queue no task of `tasks` names.
drain_report drain(test_area& area, std::shared_ptr<const task_registry> tasks,
                   drain_options options = {});

} // namespace troupe::testing
