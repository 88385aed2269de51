// troupe-test-worker: a worker node with the tasks the fault tests need, run as a real process.
//   troupe-test-worker DSN SCHEMA QUEUE CONCURRENCY PREFETCH GRACE_MS [NAME]
//   troupe-test-worker --config-file=PATH [--section.key=value ...]
// The second form is a node of a deployment: everything comes from its config file (and flags)
// as in any worker binary; the tasks run on its first configured queue and on the others too.
// Tasks (queue QUEUE):
//   record()          notes its run in SCHEMA.runs (message id, node name, attempt)
//   noop()            does nothing (the soak's task: the node's own costs alone)
//   sleep_ms(int ms)  notes its run, then sleeps
//   crash_once()      notes its run; on its first attempt brings the whole process down
//   crash_always()    notes its run, then brings the whole process down (a poison message)
//   slow_inc(ms, x)   notes its run, sleeps, returns x + 1 (result stored: pipeline steps)
//   total(list)       notes its run, returns the sum of a list of integers (result stored: the
//                     step after a group)
//   guarded_sleep(ms) notes its run, holds a slot of the concurrent limiter "fault-guard" (1
//                     at once, a TTL of an hour) through a limit_guard while it sleeps
// Runs are noted through TROUPE_TEST_NOTE_DSN when it is set (the node's DSN may go through a
// proxy that a fault test cuts), else through DSN.
#include "storage/connection.hpp"
#include "storage/naming.hpp"
#include "troupe/config.hpp"
#include "troupe/coordination.hpp"
#include "troupe/error.hpp"
#include "troupe/log.hpp"
#include "troupe/task.hpp"
#include "troupe/worker_node.hpp"

#include <fmt/format.h>

#include <cstdlib>
#include <iostream>
#include <optional>
#include <string_view>
#include <thread>
#include <vector>

namespace {

std::string g_dsn;
std::string g_note_dsn;
std::string g_schema;
std::string g_name;

// Notes a run in SCHEMA.runs. The database may be restarting (a fault test does that): keep
// trying for a while, so the note is not what fails the task.
void note_run(const troupe::task_context& ctx) {
  thread_local std::optional<troupe::storage::connection> conn;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  for (;;) {
    try {
      if (!conn || !conn->ok())
        conn.emplace(troupe::storage::connection::open(g_note_dsn, "troupe-test-task"));
      conn->exec_params(fmt::format("INSERT INTO {}.runs (message_id, node, attempt) "
                                    "VALUES ($1, $2, $3)",
                                    troupe::storage::quote_identifier(g_schema)),
                        {ctx.message_id, g_name, std::to_string(ctx.attempt)}, "note_run");
      return;
    } catch (const troupe::error& e) {
      if (e.code() != troupe::errc::connection_lost || std::chrono::steady_clock::now() > deadline)
        throw;
      conn.reset();
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }
}

// The fault tests' tasks, on `queue` (and `also`).
troupe::task_registry fault_tasks(const std::string& queue, const std::vector<std::string>& also) {
  troupe::task_options plain;
  plain.also_queues = also;
  troupe::task_options keep = plain;
  keep.store_results = true;
  troupe::task_registry tasks;
  tasks.define(
    troupe::task_ref<void()>{"record", queue}, [](troupe::task_context& ctx) { note_run(ctx); },
    plain);
  tasks.define(
    troupe::task_ref<void()>{"noop", queue}, [] {}, plain);
  tasks.define(
    troupe::task_ref<void(int)>{"sleep_ms", queue},
    [](troupe::task_context& ctx, int ms) {
      note_run(ctx);
      std::this_thread::sleep_for(std::chrono::milliseconds(ms));
    },
    plain);
  tasks.define(
    troupe::task_ref<void()>{"crash_once", queue},
    [](troupe::task_context& ctx) {
      note_run(ctx);
      if (ctx.attempt == 1)
        std::abort();
    },
    plain);
  tasks.define(
    troupe::task_ref<void()>{"crash_always", queue},
    [](troupe::task_context& ctx) {
      note_run(ctx);
      std::abort();
    },
    plain);
  tasks.define(
    troupe::task_ref<int(int, int)>{"slow_inc", queue},
    [](troupe::task_context& ctx, int ms, int x) {
      note_run(ctx);
      std::this_thread::sleep_for(std::chrono::milliseconds(ms));
      return x + 1;
    },
    keep);
  tasks.define(
    troupe::task_ref<int(std::vector<int>)>{"total", queue},
    [](troupe::task_context& ctx, const std::vector<int>& xs) {
      note_run(ctx);
      int sum = 0;
      for (int x : xs)
        sum += x;
      return sum;
    },
    keep);
  tasks.define(
    troupe::task_ref<void(int)>{"guarded_sleep", queue},
    [](troupe::task_context& ctx, int ms) {
      troupe::limit_guard slot(ctx, troupe::concurrency("fault-guard", 1), std::chrono::hours(1));
      note_run(ctx);
      std::this_thread::sleep_for(std::chrono::milliseconds(ms));
    },
    plain);
  return tasks;
}

int run_node(troupe::node_options options, troupe::task_registry tasks) {
  troupe::worker_node node(std::move(options), std::move(tasks));
  auto summary = node.run();
  std::cout << fmt::format("executed={} released={} abandoned={}", summary.executed,
                           summary.released, summary.abandoned)
            << std::endl;
  if (summary.abandoned > 0)
    std::_Exit(summary.exit_code); // tasks still run on their threads
  return summary.exit_code;
}

// A node of a deployment: its config file says everything.
int run_from_config(int argc, char** argv) {
  auto settings = troupe::config::load(argc, argv);
  if (settings.help_printed)
    return 0;
  troupe::configure_logging(settings.logging.level, settings.logging.format);
  g_dsn = settings.node.dsn;
  if (g_note_dsn.empty())
    g_note_dsn = g_dsn;
  g_schema = settings.node.area.schema;
  g_name = settings.node.name.empty() ? "worker" : settings.node.name;
  std::vector<std::string> also;
  for (std::size_t i = 1; i < settings.node.queues.size(); ++i)
    also.push_back(settings.node.queues[i].name);
  auto tasks = fault_tasks(settings.node.queues.front().name, also);
  return run_node(std::move(settings.node), std::move(tasks));
}

} // namespace

int main(int argc, char** argv) {
  if (const char* note = std::getenv("TROUPE_TEST_NOTE_DSN"))
    g_note_dsn = note;
  if (argc > 1 && std::string_view(argv[1]).starts_with("--")) {
    try {
      return run_from_config(argc, argv);
    } catch (const std::exception& e) {
      std::cerr << "troupe-test-worker: " << e.what() << "\n";
      return 2;
    }
  }
  if (argc < 7) {
    std::cerr << "usage: troupe-test-worker DSN SCHEMA QUEUE CONCURRENCY PREFETCH GRACE_MS [NAME]\n"
                 "       troupe-test-worker --config-file=PATH [--section.key=value ...]\n";
    return 2;
  }
  g_dsn = argv[1];
  if (g_note_dsn.empty())
    g_note_dsn = g_dsn;
  g_schema = argv[2];
  std::string queue = argv[3];
  g_name = argc > 7 ? argv[7] : "worker";
  try {
    troupe::node_options options;
    options.dsn = g_dsn;
    options.area.schema = g_schema;
    options.name = g_name;
    options.janitor_interval = std::chrono::milliseconds(500);
    options.shutdown_grace = std::chrono::milliseconds(std::stoi(argv[6]));
    troupe::queue_options q;
    q.name = queue;
    q.concurrency = std::stoi(argv[4]);
    q.prefetch = std::stoi(argv[5]);
    q.poll_interval = std::chrono::milliseconds(200);
    options.queues.push_back(q);
    return run_node(std::move(options), fault_tasks(queue, {}));
  } catch (const std::exception& e) {
    std::cerr << "troupe-test-worker: " << e.what() << "\n";
    return 1;
  }
}
