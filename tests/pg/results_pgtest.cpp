#define CAF_SUITE results
#include <caf/test/unit_test.hpp>

#include "node_harness.hpp"

#include <fmt/format.h>

#include <stdexcept>

using namespace troupe;
using namespace std::chrono_literals;

namespace {

task_ref<int(int, int)> add{"add"};
task_ref<int(int, int)> add_unstored{"add_unstored"};
task_ref<void()> doomed{"doomed"};
task_ref<void()> quick{"quick"};

struct fixture : testkit::node_harness {
  fixture() {
    task_options keep;
    keep.store_results = true;
    tasks->define(
      add, [](int a, int b) { return a + b; }, keep);
    tasks->define(add_unstored, [](int a, int b) { return a + b; });
    task_options once = keep;
    once.max_retries = 0;
    tasks->define(
      doomed, [] { throw std::domain_error("out of luck"); }, once);
    tasks->define(
      quick, [] {}, keep);
  }

  template <class F>
  errc failure_of(F&& f, std::string* type = nullptr) {
    try {
      f();
    } catch (const result_error& e) {
      if (type)
        *type = e.failure_type() + "|" + e.failure_text();
      return e.code();
    }
    CAF_FAIL("expected a result_error");
    return errc::bug;
  }
};

} // namespace

// Requests a result from the waiter when told to, and stays responsive meanwhile. (A function
// with arguments: CAF 0.17 trips UBSan when it spawns a function object without any.)
caf::behavior asker_impl(caf::event_based_actor* me, result_waiter_actor waiter, std::string id) {
  return {
    [=](caf::get_atom, const caf::actor& report_to) {
      me->request(waiter, caf::infinite, caf::get_atom::value, id, std::int64_t{10000})
        .then([=](const std::string& json) { me->send(report_to, json); },
              [=](caf::error& e) { me->send(report_to, describe(e)); });
    },
    [=](caf::ping_atom) { return caf::pong_atom::value; },
  };
}

CAF_TEST_FIXTURE_SCOPE(results_tests, fixture)

CAF_TEST(a blocking wait returns the result once the task has run) {
  start_node();
  auto m = producer.enqueue(add(2, 3));
  CAF_CHECK_EQUAL(producer.get_result<int>(m, true), 5);
  // Asking again reads the stored result at once.
  CAF_CHECK_EQUAL(producer.get_result<int>(m), 5);
}

CAF_TEST(a result is missing before the message finishes and for unknown ids) {
  auto m = producer.enqueue(add(1, 1));
  CAF_CHECK(failure_of([&] { producer.get_result<int>(m); }) == errc::not_found);
  CAF_CHECK(failure_of([&] { producer.get_result_json(new_message_id()); }) == errc::not_found);
}

CAF_TEST(a blocking wait times out) {
  auto m = producer.enqueue(add(1, 1)); // no node runs it
  auto start = std::chrono::steady_clock::now();
  CAF_CHECK(failure_of([&] { producer.get_result<int>(m, true, 300ms); }) == errc::timeout);
  CAF_CHECK(std::chrono::steady_clock::now() - start >= 300ms);
}

CAF_TEST(the default timeout is ten seconds) {
  CAF_CHECK_EQUAL(default_result_timeout.count(), 10000);
}

CAF_TEST(a failed task reports its failure type and text) {
  start_node();
  auto m = producer.enqueue(doomed());
  std::string what;
  CAF_CHECK(failure_of([&] { producer.get_result_json(m.id, true); }, &what) == errc::task_failed);
  CAF_CHECK_EQUAL(what, "std::domain_error|out of luck");
}

CAF_TEST(a skipped message reports the skip) {
  auto m = producer.enqueue(add(1, 2).with_delay(200ms));
  m.options_json = with_option(m.options_json, "max_age", std::int64_t{1});
  producer.enqueue(m); // re-publish the same id with max_age 1 ms: older than that when it runs
  start_node();
  std::string what;
  CAF_CHECK(failure_of([&] { producer.get_result_json(m.id, true); }, &what) == errc::task_skipped);
  CAF_CHECK(what.starts_with("troupe::age_limit_exceeded|"));
}

CAF_TEST(a task that does not store results has none to give) {
  start_node();
  auto m = producer.enqueue(add_unstored(2, 2));
  CAF_CHECK(testkit::wait_until(
    [&] {
      return area.scalar(fmt::format("SELECT count(*) FROM {} WHERE state = 'done'",
                                     area.queue_table())) == 1;
    },
    10s));
  CAF_CHECK(failure_of([&] { producer.get_result<int>(m); }) == errc::not_found);
}

CAF_TEST(an actor waits for a result without blocking) {
  auto waiter = spawn_result_waiter(sys, area.dsn(), area.where());
  auto m = producer.enqueue(add(20, 22));
  caf::scoped_actor self{sys};
  auto asker = sys.spawn(asker_impl, waiter, m.id);
  self->send(asker, caf::get_atom::value, caf::actor_cast<caf::actor>(self));
  bool answered_ping = false;
  self->request(asker, 5s, caf::ping_atom::value)
    .receive([&](caf::pong_atom) { answered_ping = true; }, [](caf::error&) {});
  CAF_CHECK(answered_ping); // no result yet: no node is running
  start_node();
  std::string got;
  self->receive([&](const std::string& json) { got = json; },
                caf::after(15s) >> [&] { got = "nothing"; });
  CAF_CHECK_EQUAL(got, "42");
  self->send_exit(asker, caf::exit_reason::user_shutdown);
  self->send_exit(waiter, caf::exit_reason::user_shutdown);
}

CAF_TEST_FIXTURE_SCOPE_END()
