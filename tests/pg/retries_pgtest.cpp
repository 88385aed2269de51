#define CAF_SUITE retries
#include <caf/test/unit_test.hpp>

#include "node_harness.hpp"

#include <fmt/format.h>

#include <atomic>
#include <mutex>
#include <stdexcept>

using namespace troupe;
using namespace std::chrono_literals;

namespace {

task_ref<void()> always_fails{"always_fails"};
task_ref<int()> fails_once{"fails_once"};
task_ref<int()> asks_later{"asks_later"};
task_ref<void()> asks_always{"asks_always"};
task_ref<void(message_summary, retry_info)> gave_up{"gave_up"};
task_ref<void(message_summary, std::string)> succeeded{"succeeded"};
task_ref<void(message_summary, failure_info)> failed_once{"failed_once"};

// What the handler tasks saw, written by executor threads.
struct seen_log {
  std::mutex mutex;
  std::vector<std::string> lines;
  void add(std::string s) {
    std::lock_guard g{mutex};
    lines.push_back(std::move(s));
  }
  std::vector<std::string> get() {
    std::lock_guard g{mutex};
    return lines;
  }
};

struct fixture : testkit::node_harness {
  std::shared_ptr<seen_log> seen = std::make_shared<seen_log>();
  std::shared_ptr<std::atomic<int>> calls = std::make_shared<std::atomic<int>>(0);

  fixture() {
    task_options fast;
    fast.max_retries = 2;
    fast.min_backoff = 50ms;
    fast.max_backoff = 200ms;
    fast.on_retry_exhausted = "gave_up";
    fast.on_failure = "failed_once";
    tasks->define(
      always_fails, [] { throw std::runtime_error("nope"); }, fast);
    task_options slow_retry;
    slow_retry.min_backoff = 1500ms;
    slow_retry.on_success = "succeeded";
    slow_retry.store_results = true;
    auto calls = this->calls;
    tasks->define(
      fails_once,
      [calls] {
        if (calls->fetch_add(1) == 0)
          throw std::runtime_error("first try fails");
        return 7;
      },
      slow_retry);
    task_options later;
    later.store_results = true;
    tasks->define(
      asks_later,
      [calls] {
        if (calls->fetch_add(1) == 0)
          throw retry_after(1500ms, "come back later");
        return 11;
      },
      later);
    task_options impatient;
    impatient.max_retries = 1;
    impatient.on_retry_exhausted = "gave_up";
    tasks->define(
      asks_always, [] { throw retry_after(100ms); }, impatient);
    auto seen = this->seen;
    tasks->define(gave_up, [seen](const message_summary& m, const retry_info& r) {
      seen->add(
        fmt::format("gave_up {} {} {}/{} {}", m.task, m.id, r.retries, r.max_retries, r.text));
    });
    tasks->define(succeeded, [seen](const message_summary& m, const std::string& result) {
      seen->add(fmt::format("succeeded {} {}", m.task, result));
    });
    tasks->define(failed_once, [seen](const message_summary& m, const failure_info& f) {
      seen->add(fmt::format("failed {} attempt {} {}: {}", m.task, m.attempt, f.type, f.message));
    });
    queue_options q;
    // A retry comes due without a notification, and the poll is too slow to find it within
    // the waits below: the consumer has to wake at the retry's eta on its own.
    q.poll_interval = 60s;
    start_node(options(q));
  }
};

} // namespace

CAF_TEST_FIXTURE_SCOPE(retries_tests, fixture)

CAF_TEST(a failing message is retried under the same id until retries run out) {
  auto m = producer.enqueue(always_fails());
  CAF_REQUIRE(testkit::wait_until(
    [&] { return count(fmt::format("message_id = '{}' AND state = 'failed'", m.id)) == 1; }, 15s));
  // First attempt plus two retries, one row, the failure record of the last attempt.
  CAF_CHECK_EQUAL(count(fmt::format("message_id = '{}' AND attempts = 3 AND "
                                    "error->>'type' = 'std::runtime_error' AND "
                                    "(error->>'attempt')::int = 3",
                                    m.id)),
                  1);
  CAF_REQUIRE(testkit::wait_until([&] { return seen->get().size() == 4; }, 10s));
  auto lines = seen->get();
  std::sort(lines.begin(), lines.end());
  // on_failure after each attempt, on_retry_exhausted once with the metadata.
  CAF_CHECK_EQUAL(lines[0], "failed always_fails attempt 1 std::runtime_error: nope");
  CAF_CHECK_EQUAL(lines[2], "failed always_fails attempt 3 std::runtime_error: nope");
  CAF_CHECK_EQUAL(lines[3], fmt::format("gave_up always_fails {} 2/2 nope", m.id));
}

CAF_TEST(the failure record is set by a failed attempt and cleared by a later success) {
  auto m = producer.enqueue(fails_once());
  CAF_REQUIRE(testkit::wait_until(
    [&] {
      return count(fmt::format("message_id = '{}' AND state = 'queued' AND "
                               "error->>'text' = 'first try fails'",
                               m.id)) == 1;
    },
    10s));
  CAF_CHECK_EQUAL(producer.get_result<int>(m, true), 7);
  CAF_CHECK_EQUAL(count(fmt::format("message_id = '{}' AND state = 'done' AND error IS NULL "
                                    "AND attempts = 2",
                                    m.id)),
                  1);
  CAF_REQUIRE(testkit::wait_until([&] { return seen->get().size() == 1; }, 10s));
  auto lines = seen->get();
  CAF_CHECK_EQUAL(lines.at(0), "succeeded fails_once 7");
}

CAF_TEST(a task that throws retry_after is retried after the delay it asked for) {
  auto m = producer.enqueue(asks_later());
  // While the row waits for its retry: eta is the completion's now() plus the delay, started_at
  // the claim's now(), both by the database's clock. Between the two lie only the task and the
  // 2 ms completion flush. (A 0 means the row is not waiting, or not yet.)
  auto eta_after_start =
    fmt::format("SELECT (extract(epoch FROM eta - started_at) * 1000)::bigint FROM {} "
                "WHERE message_id = '{}' AND state = 'queued' AND attempts = 1 AND "
                "error->>'type' = 'troupe::retry_after' AND error->>'text' = 'come back later'",
                area.queue_table(), m.id);
  std::int64_t delay = 0;
  CAF_REQUIRE(
    testkit::wait_until([&] { return (delay = area.scalar(eta_after_start)) != 0; }, 10s));
  CAF_CHECK_GREATER_OR_EQUAL(delay, 1500);
  CAF_CHECK_LESS(delay, 4000); // the task's backoff would be 15 s or more
  CAF_CHECK_EQUAL(producer.get_result<int>(m, true), 11);
  // The second attempt started no earlier than the eta the first one set (a success keeps it).
  CAF_CHECK_EQUAL(count(fmt::format("message_id = '{}' AND state = 'done' AND attempts = 2 AND "
                                    "started_at >= eta AND error IS NULL",
                                    m.id)),
                  1);
}

CAF_TEST(retry_after uses up retries and ends like any exhausted failure) {
  auto m = producer.enqueue(asks_always());
  CAF_REQUIRE(testkit::wait_until(
    [&] { return count(fmt::format("message_id = '{}' AND state = 'failed'", m.id)) == 1; }, 15s));
  CAF_CHECK_EQUAL(count(fmt::format("message_id = '{}' AND attempts = 2 AND "
                                    "error->>'type' = 'troupe::retry_after' AND "
                                    "error->>'text' = 'retry requested by the task'",
                                    m.id)),
                  1);
  CAF_REQUIRE(testkit::wait_until([&] { return seen->get().size() == 1; }, 10s));
  auto lines = seen->get();
  CAF_CHECK_EQUAL(lines.at(0),
                  fmt::format("gave_up asks_always {} 1/1 retry requested by the task", m.id));
}

CAF_TEST_FIXTURE_SCOPE_END()
