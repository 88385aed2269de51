// troupe-demo: the main job. Publishes the hello workload, runs one worker node on it until
// every message is done, and prints what ran and how long it took. Without a DSN (no --dsn, no
// TROUPE_DSN) it starts a private PostgreSQL cluster in .troupe/pg and stops it at the end.
//
//   build/bin/troupe-demo [--dsn DSN] [--messages N] [--concurrency N] [--prefetch N]
#include "../hello/hello_tasks.hpp"
#include "local_postgres.hpp"
#include "storage/connection.hpp"
#include "storage/migrations.hpp"
#include "storage/queries.hpp"

#include <troupe/client.hpp>
#include <troupe/error.hpp>
#include <troupe/log.hpp>
#include <troupe/worker_node.hpp>

#include <fmt/format.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <iostream>
#include <optional>
#include <thread>

#include <unistd.h>

namespace {

using clock_type = std::chrono::steady_clock;

struct demo_options {
  std::string dsn;
  int messages = 20000;
  int concurrency = 4;
  int prefetch = 200;
};

demo_options parse(int argc, char** argv) {
  demo_options o;
  if (const char* env = std::getenv("TROUPE_DSN"))
    o.dsn = env;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc)
        throw troupe::error(troupe::errc::invalid_argument, arg + " needs a value");
      return argv[++i];
    };
    auto number = [&](int lo, int hi) {
      auto text = value();
      int n = std::atoi(text.c_str());
      if (std::to_string(n) != text || n < lo || n > hi)
        throw troupe::error(
          troupe::errc::invalid_argument,
          fmt::format("{} must be a whole number from {} to {}, got \"{}\"", arg, lo, hi, text));
      return n;
    };
    if (arg == "--dsn")
      o.dsn = value();
    else if (arg == "--messages")
      o.messages = number(1, 10'000'000);
    else if (arg == "--concurrency")
      o.concurrency = number(1, 1024);
    else if (arg == "--prefetch")
      o.prefetch = number(0, 65535);
    else
      throw troupe::error(troupe::errc::invalid_argument,
                          "unknown option " + arg +
                            " (known: --dsn, --messages, --concurrency, --prefetch)");
  }
  return o;
}

double seconds_since(clock_type::time_point t) {
  return std::chrono::duration<double>(clock_type::now() - t).count();
}

} // namespace

int main(int argc, char** argv) {
  std::optional<troupe::testkit::local_postgres> private_pg;
  try {
    auto opts = parse(argc, argv);
    if (opts.dsn.empty()) {
      std::cout << "starting a private PostgreSQL cluster in .troupe/pg" << std::endl;
      try {
        private_pg = troupe::testkit::local_postgres::start({".troupe/pg", 5432, ""});
      } catch (const troupe::error& e) {
        if (e.code() != troupe::errc::invalid_argument)
          throw;
        // Running as root in a folder the postgres user cannot enter: use /tmp instead.
        auto fallback = "/tmp/troupe-demo-pg-" + std::to_string(::getuid());
        std::cout << e.what() << "; using " << fallback << " instead" << std::endl;
        private_pg = troupe::testkit::local_postgres::start({fallback, 5432, ""});
      }
      opts.dsn = private_pg->dsn();
    }
    troupe::area where{"troupe_demo", ""};
    auto stmts = troupe::storage::make_statement_set(where);
    auto sql = troupe::storage::connection::open(opts.dsn, "troupe-demo");
    sql.exec("DROP SCHEMA IF EXISTS troupe_demo CASCADE");
    troupe::storage::migrate(sql, *stmts);

    // Publish the workload: greetings, small Fibonacci numbers and sums, in batches of 1,000.
    troupe::client producer({opts.dsn, where, "troupe-demo-producer"});
    auto publish_start = clock_type::now();
    std::vector<troupe::message> batch;
    for (int i = 0; i < opts.messages; ++i) {
      switch (i % 3) {
      case 0:
        batch.push_back(hello::greet("visitor " + std::to_string(i)));
        break;
      case 1:
        batch.push_back(hello::fibonacci(10 + i % 10));
        break;
      default:
        batch.push_back(hello::sum({i, i + 1, i + 2}));
      }
      if (batch.size() == 1000 || i + 1 == opts.messages) {
        producer.enqueue_many(std::move(batch));
        batch.clear();
      }
    }
    auto publish_seconds = seconds_since(publish_start);
    std::cout << fmt::format("published {} messages in {:.2f} s ({:.0f}/s)", opts.messages,
                             publish_seconds, opts.messages / publish_seconds)
              << std::endl;

    // Run one worker node until everything is done.
    troupe::node_options node;
    node.dsn = opts.dsn;
    node.area = where;
    node.name = "demo-node";
    troupe::queue_options q;
    q.name = "hello";
    q.concurrency = opts.concurrency;
    q.prefetch = opts.prefetch;
    node.queues.push_back(q);
    troupe::task_registry tasks;
    hello::define_tasks(tasks);
    troupe::worker_node worker(node, std::move(tasks));

    auto run_start = clock_type::now();
    std::atomic<bool> finished{false};
    std::thread watcher([&] {
      auto conn = troupe::storage::connection::open(opts.dsn, "troupe-demo-watcher");
      std::string query =
        "SELECT count(*) FROM troupe_demo.queue WHERE state IN ('queued', 'running')";
      for (;;) {
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        if (conn.exec(query).int64(0, 0) == 0)
          break;
      }
      finished = true;
      worker.request_stop();
    });
    auto summary = worker.run();
    auto run_seconds = seconds_since(run_start);
    watcher.join();

    // What ran, checked in SQL.
    auto res = sql.exec("SELECT task_name, state, count(*), max(attempts) FROM troupe_demo.queue "
                        "GROUP BY 1, 2 ORDER BY 1, 2");
    std::cout << "what ran:" << std::endl;
    for (int r = 0; r < res.rows(); ++r)
      std::cout << fmt::format("  {:<16} {:<8} {:>8}  (max attempts {})", res.text(r, 0),
                               res.text(r, 1), res.int64(r, 2), res.int64(r, 3))
                << std::endl;
    auto done_once = sql
                       .exec("SELECT count(*) FROM troupe_demo.queue "
                             "WHERE state = 'done' AND attempts = 1")
                       .int64(0, 0);
    std::cout << fmt::format("drained {} messages in {:.2f} s ({:.0f}/s) with {} executors; "
                             "done exactly once: {}/{}",
                             summary.executed, run_seconds, summary.executed / run_seconds,
                             opts.concurrency, done_once, opts.messages)
              << std::endl;
    if (private_pg)
      private_pg->stop();
    return (finished && done_once == opts.messages && summary.exit_code == 0) ? 0 : 1;
  } catch (const std::exception& e) {
    std::cerr << "troupe-demo: " << e.what() << std::endl;
    if (private_pg)
      private_pg->stop();
    return 1;
  }
}
