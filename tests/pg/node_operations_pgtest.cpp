// What a worker node does about the operations: a pause of its queue, cancel requests for the
// messages it holds or runs, and the starts it writes. The statements themselves are tested in
// operations_pgtest.cpp.
#define CAF_SUITE node_operations
#include <caf/test/unit_test.hpp>

#include "scratch_area.hpp"
#include "storage/embedded_sql.hpp"
#include "storage/migrations.hpp"
#include "troupe/admin.hpp"
#include "troupe/caf.hpp"
#include "troupe/client.hpp"
#include "troupe/error.hpp"

#include <fmt/format.h>

#include <atomic>
#include <future>
#include <map>
#include <mutex>
#include <set>
#include <thread>

using namespace troupe;
using namespace std::chrono_literals;

namespace {

task_ref<void()> gate{"gate"};
task_ref<int(int, int)> add{"add"};
task_ref<std::string()> polite{"polite"};
task_ref<void()> stubborn{"stubborn"};
task_ref<void(int)> tally{"tally"};

std::atomic<bool> gate_open{false};
std::atomic<int> gate_started{0};
std::atomic<int> polite_started{0};
std::mutex runs_mutex;
std::map<int, int> runs; // tally argument -> times it ran

struct fixture {
  testkit::scratch_area area;
  client producer{client_options{area.dsn(), area.where()}};
  admin ops{admin_options{area.dsn(), area.where()}};
  caf::actor_system_config cfg;
  std::unique_ptr<caf::actor_system> sys;
  std::shared_ptr<task_registry> tasks = std::make_shared<task_registry>();

  fixture() {
    gate_open = false;
    gate_started = 0;
    polite_started = 0;
    {
      std::lock_guard guard{runs_mutex};
      runs.clear();
    }
    sys = std::make_unique<caf::actor_system>(cfg);
    task_options keep;
    keep.store_results = true;
    tasks->define(gate, [] {
      ++gate_started;
      auto until = std::chrono::steady_clock::now() + 30s;
      while (!gate_open && std::chrono::steady_clock::now() < until)
        std::this_thread::sleep_for(2ms);
    });
    tasks->define(
      add, [](int a, int b) { return a + b; }, keep);
    // Stops when its cancel is requested, cleans up, and returns normally.
    tasks->define(
      polite,
      [](task_context& ctx) {
        ++polite_started;
        auto until = std::chrono::steady_clock::now() + 30s;
        while (!ctx.cancel_requested() && std::chrono::steady_clock::now() < until)
          std::this_thread::sleep_for(5ms);
        return std::string(ctx.cancel_requested() ? "cleaned up" : "never told");
      },
      keep);
    // Lets check() throw.
    tasks->define(stubborn, [](task_context& ctx) {
      auto until = std::chrono::steady_clock::now() + 30s;
      while (std::chrono::steady_clock::now() < until) {
        ctx.check();
        std::this_thread::sleep_for(5ms);
      }
    });
    tasks->define(tally, [](int n) {
      std::lock_guard guard{runs_mutex};
      ++runs[n];
    });
  }

  ~fixture() { gate_open = true; }

  node_options options(std::int32_t concurrency, std::int32_t prefetch, const troupe::area& where) {
    node_options o;
    o.dsn = area.dsn();
    o.area = where;
    o.name = "ops-node";
    queue_options q;
    q.concurrency = concurrency;
    q.prefetch = prefetch;
    q.poll_interval = 10s; // notifications and the control poll, not the queue poll
    o.queues.push_back(q);
    o.janitor_interval = 500ms;
    o.shutdown_grace = 5s;
    return o;
  }
  node_options options(std::int32_t concurrency, std::int32_t prefetch) {
    return options(concurrency, prefetch, area.where());
  }

  std::int64_t count(const std::string& where) {
    return area.scalar(fmt::format("SELECT count(*) FROM {} WHERE {}", area.queue_table(), where));
  }

  void wait_ready(const node_actor& node) {
    caf::scoped_actor self{*sys};
    self->request(node, 20s, ready_atom_v)
      .receive([](const node_report&) {},
               [](caf::error& e) { CAF_FAIL("node not ready: " << describe(e)); });
  }

  void stop(const node_actor& node) {
    gate_open = true;
    caf::scoped_actor self{*sys};
    self->request(node, 30s, stop_atom_v)
      .receive([](const node_report&) {},
               [](caf::error& e) { CAF_FAIL("stop failed: " << describe(e)); });
  }
};

} // namespace

CAF_TEST_FIXTURE_SCOPE(node_operations_tests, fixture)

CAF_TEST(prefetched then paused messages go back and nothing starts until resume) {
  auto node = spawn_worker_node(*sys, options(1, 4), tasks);
  wait_ready(node);
  auto first = producer.enqueue(gate());
  CAF_REQUIRE(testkit::wait_until([&] { return gate_started == 1; }, 20s));
  std::vector<message> batch;
  for (int i = 0; i < 4; ++i)
    batch.push_back(add(i, i));
  auto sent = producer.enqueue_many(batch);
  // All four are claimed: prefetched behind the running gate.
  CAF_REQUIRE(testkit::wait_until([&] { return count("state = 'running'") == 5; }, 20s));
  auto etas = area.scalar(fmt::format("SELECT sum(extract(epoch FROM eta) * 1000)::bigint FROM {} "
                                      "WHERE task_name = 'add'",
                                      area.queue_table()));
  ops.pause("default");
  // Handed back with their eta and no attempt used; the gate goes on.
  CAF_CHECK(testkit::wait_until(
    [&] { return count("task_name = 'add' AND state = 'queued' AND attempts = 0") == 4; }, 5s));
  CAF_CHECK_EQUAL(area.scalar(fmt::format("SELECT sum(extract(epoch FROM eta) * 1000)::bigint "
                                          "FROM {} WHERE task_name = 'add'",
                                          area.queue_table())),
                  etas);
  CAF_CHECK_EQUAL(count(fmt::format("message_id = '{}' AND state = 'running'", first.id)), 1);
  gate_open = true;
  CAF_CHECK(testkit::wait_until(
    [&] { return count(fmt::format("message_id = '{}' AND state = 'done'", first.id)) == 1; },
    10s));
  // Over a control poll period and more, nothing of the paused queue starts (the wait ends at
  // once if something does).
  CAF_CHECK(!testkit::wait_until(
    [&] { return count("task_name = 'add' AND state = 'queued'") != 4; }, 1500ms));
  ops.resume("default");
  CAF_CHECK(testkit::wait_until(
    [&] { return count("task_name = 'add' AND state = 'done' AND attempts = 1") == 4; }, 10s));
  stop(node);
}

CAF_TEST(prefetched then cancelled messages never start) {
  auto node = spawn_worker_node(*sys, options(1, 4), tasks);
  wait_ready(node);
  producer.enqueue(gate());
  CAF_REQUIRE(testkit::wait_until([&] { return gate_started == 1; }, 20s));
  auto doomed = producer.enqueue(add(40, 2));
  auto kept = producer.enqueue(add(1, 2));
  CAF_REQUIRE(testkit::wait_until([&] { return count("state = 'running'") == 3; }, 20s));
  // A waiter is already blocked on the doomed message.
  auto waiting = std::async(std::launch::async, [&] {
    client reader{client_options{area.dsn(), area.where()}};
    try {
      reader.get_result_json(doomed.id, true, 20s);
      return std::string("a result");
    } catch (const result_error& e) {
      return std::string(to_string(e.code()));
    } catch (const error& e) {
      return std::string(e.what());
    }
  });
  auto r = ops.cancel(doomed.id);
  CAF_CHECK(r.outcome == cancel_outcome::requested); // a node holds it
  CAF_CHECK(testkit::wait_until(
    [&] { return count(fmt::format("message_id = '{}' AND state = 'cancelled'", doomed.id)) == 1; },
    5s));
  CAF_CHECK_EQUAL(waiting.get(), "task_cancelled");
  gate_open = true;
  CAF_CHECK(testkit::wait_until(
    [&] { return count(fmt::format("message_id = '{}' AND state = 'done'", kept.id)) == 1; }, 10s));
  // Never started: no result, no start, no attempt.
  CAF_CHECK_EQUAL(count(fmt::format("message_id = '{}' AND state = 'cancelled' AND result IS NULL "
                                    "AND started_at IS NULL AND attempts = 0",
                                    doomed.id)),
                  1);
  stop(node);
}

CAF_TEST(a running task sees its cancel and a failure after it is not retried) {
  auto node = spawn_worker_node(*sys, options(2, 0), tasks);
  wait_ready(node);
  auto p = producer.enqueue(polite());
  auto s = producer.enqueue(stubborn());
  CAF_REQUIRE(testkit::wait_until([&] { return polite_started == 1; }, 20s));
  CAF_REQUIRE(testkit::wait_until([&] { return count("state = 'running'") == 2; }, 20s));
  auto asked = std::chrono::steady_clock::now();
  CAF_CHECK(ops.cancel(p.id).outcome == cancel_outcome::requested);
  CAF_CHECK(ops.cancel(s.id).outcome == cancel_outcome::requested);
  CAF_CHECK(testkit::wait_until(
    [&] { return count("state IN ('done', 'cancelled', 'failed')") == 2; }, 10s));
  // The polite task returned normally after cleaning up: done, with its result.
  CAF_CHECK_EQUAL(producer.get_result<std::string>(p), "cleaned up");
  // The stubborn one failed through check(): cancelled instead of retried, with its failure.
  CAF_CHECK_EQUAL(count(fmt::format("message_id = '{}' AND state = 'cancelled' AND "
                                    "error->>'type' = 'troupe::cancellation_requested'",
                                    s.id)),
                  1);
  // Within a second (the notification; the control poll is the guarantee) and a flush.
  CAF_CHECK(std::chrono::steady_clock::now() - asked < 5s);
  stop(node);
}

CAF_TEST(a cancel racing with starts gives one outcome per message) {
  auto node = spawn_worker_node(*sys, options(2, 8), tasks);
  wait_ready(node);
  // Both executors held: some of the messages below are prefetched, the rest queued.
  producer.enqueue_many({gate(), gate()});
  CAF_REQUIRE(testkit::wait_until([&] { return gate_started == 2; }, 20s));
  std::vector<message> batch;
  for (int i = 0; i < 200; ++i)
    batch.push_back(tally(i));
  auto sent = producer.enqueue_many(batch);
  CAF_REQUIRE(testkit::wait_until([&] { return count("state = 'running'") > 2; }, 20s));
  // Cancel every other one: the first ones while the executors are held, the rest while the
  // node works through them.
  std::vector<cancel_report> reports;
  for (std::size_t i = 0; i < sent.size(); i += 2) {
    if (i == 20)
      gate_open = true;
    reports.push_back(ops.cancel(sent[i].id));
  }
  CAF_CHECK(testkit::wait_until(
    [&] { return count("task_name = 'tally' AND state IN ('done', 'cancelled')") == 200; }, 30s));
  std::lock_guard guard{runs_mutex};
  for (std::size_t i = 0; i < sent.size(); ++i) {
    auto ran = runs.count(static_cast<int>(i)) ? runs[static_cast<int>(i)] : 0;
    CAF_CHECK(ran <= 1);
    auto done = count(fmt::format("message_id = '{}' AND state = 'done'", sent[i].id)) == 1;
    // Ran and done, or never ran and cancelled: never both, never neither.
    CAF_CHECK_EQUAL(done, ran == 1);
    if (i % 2 == 1)
      CAF_CHECK(done);
  }
  std::set<cancel_outcome> seen;
  for (const auto& r : reports)
    seen.insert(r.outcome);
  // Both kinds happened: queued ones cancelled at once, prefetched ones by request.
  CAF_CHECK(seen.contains(cancel_outcome::cancelled));
  CAF_CHECK(seen.contains(cancel_outcome::requested));
  CAF_CHECK(!seen.contains(cancel_outcome::missing));
  stop(node);
}

CAF_TEST(a long attempt has its start written while it runs) {
  // Published before the node starts: one claim takes all three. The quick one goes to the
  // idle executor (its start written with the claim); the long one waits behind it and starts
  // from there, with no start written until its node writes it.
  auto sent = producer.enqueue_many({add(1, 1), gate(), add(2, 2)});
  auto node = spawn_worker_node(*sys, options(1, 2), tasks);
  CAF_REQUIRE(testkit::wait_until([&] { return gate_started == 1; }, 20s));
  CAF_CHECK_EQUAL(count(fmt::format("message_id = '{}' AND started_at IS NULL", sent[1].id)), 1);
  CAF_CHECK(testkit::wait_until(
    [&] {
      return count(fmt::format("message_id = '{}' AND started_at IS NOT NULL", sent[1].id)) == 1;
    },
    5s));
  // The one behind it has not started: no start.
  CAF_CHECK_EQUAL(count(fmt::format("message_id = '{}' AND state = 'running' AND started_at IS "
                                    "NULL",
                                    sent[2].id)),
                  1);
  gate_open = true;
  CAF_CHECK(testkit::wait_until([&] { return count("state = 'done'") == 3; }, 10s));
  CAF_CHECK_EQUAL(count("state = 'done' AND started_at IS NOT NULL AND started_at <= finished_at"),
                  3);
  stop(node);
}

CAF_TEST(the janitor purges finished rows past their retention) {
  auto o = options(1, 0);
  o.retention_done = std::chrono::minutes(1);
  o.retention_failed = 0ms; // kept
  auto node = spawn_worker_node(*sys, o, tasks);
  wait_ready(node);
  std::vector<message> batch;
  for (int i = 0; i < 6; ++i)
    batch.push_back(add(i, i));
  auto sent = producer.enqueue_many(batch);
  CAF_REQUIRE(testkit::wait_until([&] { return count("state = 'done'") == 6; }, 20s));
  // Three finished long ago, and a failed row as old.
  area.sql().exec(fmt::format("UPDATE {} SET finished_at = now() - interval '2 minutes' "
                              "WHERE message_id IN ('{}', '{}', '{}')",
                              area.queue_table(), sent[0].id, sent[1].id, sent[2].id));
  area.sql().exec(fmt::format("UPDATE {} SET state = 'failed', finished_at = now() - interval "
                              "'2 days' WHERE message_id = '{}'",
                              area.queue_table(), sent[3].id));
  CAF_CHECK(testkit::wait_until([&] { return count("true") == 3; }, 10s));
  CAF_CHECK_EQUAL(count(fmt::format("message_id = '{}' AND state = 'failed'", sent[3].id)), 1);
  CAF_CHECK_EQUAL(count("state = 'done'"), 2);
  stop(node);
}

CAF_TEST(a node on an area without migration 5 runs as before) {
  auto old = area.older_area("v4_", 4);
  auto node = spawn_worker_node(*sys, options(2, 4, old), tasks);
  wait_ready(node);
  client p{client_options{area.dsn(), old}};
  std::vector<message> batch;
  for (int i = 0; i < 20; ++i)
    batch.push_back(add(i, 1));
  p.enqueue_many(batch);
  auto done = [&] {
    return area.scalar(fmt::format("SELECT count(*) FROM {}.v4_queue WHERE state = 'done'",
                                   storage::quote_identifier(old.schema)));
  };
  CAF_CHECK(testkit::wait_until([&] { return done() == 20; }, 20s));
  // Its producers read results and re-send ids (the statements of its version): the re-sent
  // message runs a second time.
  CAF_CHECK_EQUAL(p.get_result<int>(batch[3], true, 10s), 4);
  auto runs = [&] {
    return area.scalar(fmt::format("SELECT attempts FROM {}.v4_queue WHERE message_id = '{}' "
                                   "AND state = 'done'",
                                   storage::quote_identifier(old.schema), batch[3].id));
  };
  CAF_CHECK_EQUAL(runs(), 1);
  p.enqueue(batch[3]);
  CAF_CHECK(testkit::wait_until([&] { return runs() == 2; }, 20s));
  CAF_CHECK_EQUAL(p.get_result<int>(batch[3], true, 10s), 4);
  stop(node);
}

CAF_TEST_FIXTURE_SCOPE_END()
