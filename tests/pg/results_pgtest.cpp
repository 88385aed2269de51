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
task_ref<int(int, int)> add_brief{"add_brief"};

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
    task_options brief = keep;
    brief.result_ttl = 1h;
    tasks->define(
      add_brief, [](int a, int b) { return a + b; }, brief);
  }

  // What the row of `id` says about its result: state, whether it holds one, and its
  // lifetime in whole seconds from its finish ("none" without an expiry).
  std::string result_row(const std::string& id) {
    auto r = area.sql().exec(fmt::format(
      "SELECT state || '|' || (result IS NOT NULL) || '|' || coalesce(round(extract(epoch FROM "
      "result_expires_at - finished_at))::text, 'none') FROM {} WHERE message_id = '{}'",
      area.queue_table(), id));
    return r.rows() == 1 ? std::string(r.text(0, 0)) : "missing";
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

CAF_TEST(a result past its result_ttl reads as expired and the janitor clears it) {
  auto o = options();
  o.janitor_interval = 200ms;
  start_node(o);
  auto kept = producer.enqueue(add_brief(1, 2));                         // the task's hour
  auto brief = producer.enqueue(add_brief(2, 3).with_result_ttl(300ms)); // its own
  auto endless = add_brief(3, 4);
  endless.options_json = with_option(endless.options_json, "result_ttl", 0);
  auto forever = producer.enqueue(endless); // for ever, whatever the task says
  auto plain = producer.enqueue(add(4, 5)); // no lifetime
  CAF_CHECK_EQUAL(producer.get_result<int>(kept, true), 3);
  CAF_CHECK_EQUAL(producer.get_result<int>(forever, true), 7);
  CAF_CHECK_EQUAL(producer.get_result<int>(plain, true), 9);
  CAF_CHECK_EQUAL(result_row(kept.id), "done|true|3600");
  CAF_CHECK_EQUAL(result_row(forever.id), "done|true|none");
  CAF_CHECK_EQUAL(result_row(plain.id), "done|true|none");
  // Once its 300 ms have passed, a read says it expired, blocking or not, and the janitor
  // clears the stored result; the row and its state stay.
  CAF_CHECK(testkit::wait_until([&] { return result_row(brief.id) == "done|false|0"; }, 10s));
  std::string what;
  try {
    producer.get_result<int>(brief);
  } catch (const result_error& e) {
    CAF_CHECK(e.code() == errc::not_found);
    what = e.what();
  }
  CAF_CHECK_EQUAL(what, "message " + brief.id + " finished, but its result expired (result_ttl)");
  auto asked = std::chrono::steady_clock::now();
  CAF_CHECK(failure_of([&] { producer.get_result<int>(brief, true, 5s); }) == errc::not_found);
  CAF_CHECK(std::chrono::steady_clock::now() - asked < 4s);
  // The others are untouched by the janitor's passes meanwhile.
  CAF_CHECK_EQUAL(producer.get_result<int>(kept), 3);
  CAF_CHECK_EQUAL(producer.get_result<int>(forever), 7);
  // A read of an expired result does not wait for the janitor: the expiry alone decides (with
  // the node stopped, nothing clears the result meanwhile).
  stop();
  area.sql().exec(fmt::format("UPDATE {} SET result_expires_at = finished_at - interval '1 "
                              "second' WHERE message_id = '{}'",
                              area.queue_table(), kept.id));
  CAF_CHECK_EQUAL(result_row(kept.id), "done|true|-1");
  std::string kept_what;
  try {
    producer.get_result<int>(kept);
  } catch (const result_error& e) {
    kept_what = e.what();
  }
  CAF_CHECK_EQUAL(kept_what,
                  "message " + kept.id + " finished, but its result expired (result_ttl)");
}

CAF_TEST_FIXTURE_SCOPE_END()
