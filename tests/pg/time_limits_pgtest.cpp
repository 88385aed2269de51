#define CAF_SUITE time_limits
#include <caf/test/unit_test.hpp>

#include "node_harness.hpp"

#include <fmt/format.h>

#include <atomic>
#include <thread>

using namespace troupe;
using namespace std::chrono_literals;

namespace {

task_ref<void()> cooperative{"cooperative"};
task_ref<void()> stubborn{"stubborn"};
task_ref<void()> long_runner{"long_runner"};
task_ref<void()> stuck{"stuck"};

struct counters {
  std::atomic<int> stubborn_returned{0};
  std::atomic<bool> release_stuck{false};
  std::atomic<int> stuck_started{0};
  std::atomic<int> stuck_returned{0};
  std::atomic<int> long_runner_started{0};
  std::atomic<bool> saw_shutdown{false};
};

struct fixture : testkit::node_harness {
  std::shared_ptr<counters> seen = std::make_shared<counters>();

  fixture() {
    task_options limited;
    limited.time_limit = 100ms;
    limited.max_retries = 0;
    tasks->define(
      cooperative,
      [](task_context& ctx) {
        for (;;) {
          ctx.check(); // throws time_limit_exceeded after 100 ms
          std::this_thread::sleep_for(5ms);
        }
      },
      limited);
    task_options ignores = limited;
    ignores.max_retries = 1;
    ignores.min_backoff = 10ms;
    ignores.max_backoff = 20ms;
    auto seen = this->seen;
    tasks->define(
      stubborn,
      [seen] {
        std::this_thread::sleep_for(700ms); // never looks at its time limit
        ++seen->stubborn_returned;
      },
      ignores);
    task_options never_returns = limited;
    tasks->define(
      stuck,
      [seen] {
        ++seen->stuck_started;
        // Ignores its time limit, and returns only when the test says so.
        while (!seen->release_stuck)
          std::this_thread::sleep_for(5ms);
        ++seen->stuck_returned;
      },
      never_returns);
    task_options told;
    told.notify_shutdown = true;
    told.max_retries = 0;
    tasks->define(
      long_runner,
      [seen](task_context& ctx) {
        ++seen->long_runner_started;
        try {
          for (;;) {
            ctx.check();
            std::this_thread::sleep_for(5ms);
          }
        } catch (const shutdown_requested&) {
          seen->saw_shutdown = true;
          throw;
        }
      },
      told);
  }

  void start_node() {
    queue_options q;
    q.poll_interval = 100ms;
    auto o = options(q);
    o.time_limit_grace = 200ms;
    o.shutdown_grace = 5s;
    node_harness::start_node(o);
  }
};

} // namespace

CAF_TEST_FIXTURE_SCOPE(time_limit_tests, fixture)

CAF_TEST(a task that checks its context stops at its time limit) {
  start_node();
  auto m = producer.enqueue(cooperative());
  CAF_CHECK(testkit::wait_until(
    [&] {
      return count(fmt::format("message_id = '{}' AND state = 'failed' AND "
                               "error->>'type' = 'troupe::time_limit_exceeded'",
                               m.id)) == 1;
    },
    10s));
}

CAF_TEST(
  a task that ignores its time limit is abandoned and retried and its late completion refused) {
  start_node();
  auto m = producer.enqueue(stubborn());
  // Both attempts are abandoned at about 100 ms + 200 ms grace, long before either returns.
  CAF_REQUIRE(testkit::wait_until(
    [&] {
      return count(fmt::format("message_id = '{}' AND state = 'failed' AND attempts = 2 AND "
                               "error->>'type' = 'troupe::time_limit_abandoned'",
                               m.id)) == 1;
    },
    10s));
  CAF_CHECK(seen->stubborn_returned < 2);
  // Both abandoned attempts do return later; the row stays as the abandonment left it.
  CAF_REQUIRE(testkit::wait_until([&] { return seen->stubborn_returned == 2; }, 10s));
  caf::scoped_actor self{sys};
  self->request(*node, 5s, status_atom_v).receive([](const node_report&) {}, [](caf::error&) {});
  CAF_CHECK_EQUAL(
    count(fmt::format("message_id = '{}' AND state = 'failed' AND attempts = 2", m.id)), 1);
  CAF_CHECK_EQUAL(count("state = 'done'"), 0);
}

CAF_TEST(a task that asked for it is told the node is shutting down) {
  start_node();
  auto m = producer.enqueue(long_runner());
  CAF_REQUIRE(testkit::wait_until([&] { return seen->long_runner_started == 1; }, 10s));
  auto r = stop();
  CAF_CHECK(seen->saw_shutdown);
  CAF_CHECK_EQUAL(r.abandoned, 0);
  CAF_CHECK_EQUAL(count(fmt::format("message_id = '{}' AND state = 'failed' AND "
                                    "error->>'type' = 'troupe::shutdown_requested'",
                                    m.id)),
                  1);
}

CAF_TEST(an actor system shuts down while an abandoned task still runs) {
  start_node();
  auto m = producer.enqueue(stuck());
  CAF_REQUIRE(testkit::wait_until(
    [&] {
      return count(fmt::format("message_id = '{}' AND state = 'failed' AND "
                               "error->>'type' = 'troupe::time_limit_abandoned'",
                               m.id)) == 1;
    },
    10s));
  CAF_CHECK_EQUAL(seen->stuck_started, 1);
  auto r = stop();
  CAF_CHECK_EQUAL(r.abandoned, 1); // its thread still runs the task
  // The application's actor system goes, with the task still inside its thread. A watchdog
  // lets the task go after 10 s, in case the shutdown waits for it (the defect).
  std::atomic<bool> down{false};
  std::thread watchdog([&] {
    auto until = std::chrono::steady_clock::now() + 10s;
    while (!down && std::chrono::steady_clock::now() < until)
      std::this_thread::sleep_for(10ms);
    seen->release_stuck = true;
  });
  shut_down_actor_system();
  int returned_before = seen->stuck_returned;
  down = true;
  watchdog.join();
  CAF_CHECK_EQUAL(returned_before, 0); // the system did not wait for the task
  // The thread ends once its task returns, and touches nothing: the row stays as the
  // abandonment left it.
  CAF_CHECK(testkit::wait_until([&] { return seen->stuck_returned == 1; }, 10s));
  CAF_CHECK_EQUAL(
    count(fmt::format("message_id = '{}' AND state = 'failed' AND attempts = 1", m.id)), 1);
}

CAF_TEST_FIXTURE_SCOPE_END()
