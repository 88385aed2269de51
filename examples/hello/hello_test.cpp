// The hello tasks' tests, written as a user writes them with Troupe's test kit. No test framework
// is needed: a failed expectation throws, and main reports it. With TROUPE_TEST_DSN set, the
// tests use a throwaway schema in that database; without it, a private PostgreSQL cluster.
//
//   TROUPE_TEST_DSN=postgresql:///postgres build/bin/hello-test
#include "hello_tasks.hpp"

#include <troupe/error.hpp>
#include <troupe/testing.hpp>

#include <cstdlib>
#include <iostream>
#include <memory>
#include <optional>

namespace {

int checks = 0;

void check(bool holds, const char* what) {
  ++checks;
  if (!holds)
    throw troupe::testing::expectation_failed(std::string("check failed: ") + what);
}

} // namespace

int main() {
  try {
    namespace testing = troupe::testing;
    std::optional<testing::private_cluster> cluster;
    if (const char* dsn = std::getenv("TROUPE_TEST_DSN"); dsn == nullptr || *dsn == '\0')
      cluster.emplace();
    testing::test_area area = cluster ? testing::test_area(cluster->dsn()) : testing::test_area();
    auto tasks = std::make_shared<troupe::task_registry>();
    hello::define_tasks(*tasks);

    // A task run inline: its arguments and result go through JSON as through the queue.
    check(testing::run_inline(*tasks, hello::greet("Ada")).result<std::string>() == "hello, Ada",
          "greet says hello");
    check(testing::run_inline(*tasks, hello::fibonacci(10)).result<std::int64_t>() == 55,
          "fibonacci(10) is 55");
    check(testing::run_inline(*tasks, hello::sum({1, 2, 3})).result<std::int64_t>() == 6,
          "sum adds up");

    // What the code under test publishes is in the queue, with its arguments.
    auto greeting = area.client().enqueue(hello::greet("Grace"));
    area.client().enqueue(hello::fibonacci(20).with_delay(std::chrono::hours(1)));
    testing::require_enqueued(area, hello::greet("Grace"));
    testing::require_not_enqueued(area, hello::greet("Ada"));
    auto later = testing::require_enqueued(area, hello::fibonacci(20));
    check(later.runs_in_ms > 3'000'000, "the delayed message waits about an hour");

    // A real node runs the queue: the greeting now, the delayed one stays.
    auto drained = testing::drain(area, tasks);
    check(drained.done == 1 && drained.scheduled == 1, "one done, one still delayed");
    check(area.client().get_result<std::string>(greeting) == "hello, Grace",
          "the greeting's result is stored");
    check(area.admin().get_state(greeting.id)->status == "success", "its state says success");

    // With the scheduled ones: the delayed message runs too.
    drained = testing::drain(area, tasks, {.with_scheduled = true});
    check(drained.done == 2 && drained.scheduled == 0, "both done");

    std::cout << "hello tests: " << checks << " checks passed\n";
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "hello tests: " << e.what() << "\n";
    return 1;
  }
}
