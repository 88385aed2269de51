#define CAF_SUITE executor_slots
#include <caf/test/unit_test.hpp>

#include "actors/executor_slots.hpp"
#include "fake_executor.hpp"

#include <string>
#include <vector>

using namespace troupe;
using namespace troupe::actors;
using troupe::testkit::claimed;
using troupe::testkit::fake_executor;

namespace {

struct fixture {
  testkit::fake_executors fakes;
  ready_queue ready;

  executor_slots make(std::size_t count) {
    auto factory = fakes.factory();
    return executor_slots(count,
                          [factory](std::shared_ptr<std::atomic<std::uint64_t>> gate, std::size_t,
                                    std::uint64_t) { return factory(std::move(gate), {}); });
  }

  std::vector<std::string> ready_ids() {
    std::vector<std::string> out;
    ready.ids(out);
    return out;
  }
};

using ids = std::vector<std::string>;

} // namespace

CAF_TEST_FIXTURE_SCOPE(executor_slots_tests, fixture)

CAF_TEST(ready messages start by priority then eta then id whatever order they came in) {
  ready.push(claimed("c", 5, 100));
  ready.push(claimed("b", 0, 300));
  ready.push(claimed("a", 0, 300));
  ready.push(claimed("d", -1, 900));
  ready.push(claimed("e", 0, 200));
  CAF_CHECK_EQUAL(ready_ids(), (ids{"d", "e", "a", "b", "c"}));
  CAF_CHECK_EQUAL(ready.pop().id, "d");
  ready.drop_claim(1);
  CAF_CHECK(ready.empty());
}

CAF_TEST(idle executors get one message each and the rest queue behind them level by level) {
  auto slots = make(2);
  for (int i = 0; i < 5; ++i)
    ready.push(claimed("m" + std::to_string(i), 0, i));
  auto started = slots.assign(ready, true);
  CAF_CHECK_EQUAL(started.size(), 2u);
  CAF_CHECK_EQUAL(slots.running(), 2);
  CAF_CHECK_EQUAL(slots.queued(), 3);
  CAF_CHECK(ready.empty());
  CAF_CHECK(fakes.made[0]->runs.empty()); // nothing is sent before flush()
  slots.flush();
  // One run() per executor, tickets counting up from 1 per slot.
  CAF_REQUIRE_EQUAL(fakes.made[0]->runs.size(), 1u);
  CAF_CHECK_EQUAL(fakes.made[0]->sent_ids(), (ids{"m0", "m2", "m4"}));
  CAF_CHECK_EQUAL(fakes.made[0]->runs[0].second, 1u);
  CAF_CHECK_EQUAL(fakes.made[1]->sent_ids(), (ids{"m1", "m3"}));
  CAF_CHECK_EQUAL(fakes.made[1]->runs[0].second, 1u);
}

CAF_TEST(without pipelining only idle executors get messages) {
  auto slots = make(1);
  ready.push(claimed("a", 0));
  ready.push(claimed("b", 0));
  slots.assign(ready, false);
  CAF_CHECK_EQUAL(slots.running(), 1);
  CAF_CHECK_EQUAL(slots.queued(), 0);
  CAF_CHECK_EQUAL(ready_ids(), (ids{"b"}));
}

CAF_TEST(taking back returns what was not started and keeps what was) {
  auto slots = make(1);
  for (const char* id : {"a", "b", "c"})
    ready.push(claimed(id, 0));
  slots.assign(ready, true);
  slots.flush();
  auto* e = fakes.made[0];
  CAF_REQUIRE(e->start(1)); // "a" started; "b" and "c" were sent but not started
  slots.take_back(0, ready);
  CAF_CHECK_EQUAL(ready_ids(), (ids{"b", "c"}));
  CAF_CHECK_EQUAL(slots[0].running->id, "a");
  CAF_CHECK_EQUAL(slots.queued(), 0);
  // What was taken back can no longer start on the executor: its gate moved past every ticket.
  CAF_CHECK(!e->start(2));
  CAF_CHECK(!e->start(3));
}

CAF_TEST(a message sent but not started comes back whole even from the running place) {
  auto slots = make(1);
  ready.push(claimed("a", 0));
  slots.assign(ready, true);
  slots.flush();
  slots.take_back(0, ready);
  CAF_CHECK_EQUAL(slots.running(), 0);
  CAF_CHECK_EQUAL(ready_ids(), (ids{"a"}));
}

CAF_TEST(a message that should start first overtakes one queued behind a busy executor) {
  auto slots = make(1);
  ready.push(claimed("running", 0));
  ready.push(claimed("later", 10));
  slots.assign(ready, true);
  slots.flush();
  CAF_REQUIRE(fakes.made[0]->start(1));   // "running" runs, "later" waits behind it
  ready.push(claimed("sooner", 0, 0, 2)); // claimed afterwards, but priority 0
  slots.assign(ready, true);
  slots.flush();
  CAF_CHECK_EQUAL(slots[0].queued.size(), 2u);
  CAF_CHECK_EQUAL(slots[0].queued[0].message.id, "sooner");
  CAF_CHECK_EQUAL(slots[0].queued[1].message.id, "later");
  // The executor got them again in that order, under new tickets; the old "later" is void.
  auto* e = fakes.made[0];
  CAF_REQUIRE_EQUAL(e->runs.size(), 2u);
  CAF_CHECK_EQUAL(e->runs[1].first[0].id, "sooner");
  CAF_CHECK(!e->start(2));
  CAF_CHECK(e->start(e->runs[1].second));
}

CAF_TEST(an idle executor takes over what waits unstarted behind a busy one) {
  auto slots = make(2);
  for (const char* id : {"a", "b", "c"})
    ready.push(claimed(id, 0));
  slots.assign(ready, true); // a on 0, b on 1, c behind a
  slots.flush();
  CAF_REQUIRE(fakes.made[0]->start(1));
  CAF_REQUIRE(fakes.made[1]->start(1));
  // b finishes: slot 1 is idle, and c still waits behind a's long task.
  slots.finish_running(1);
  CAF_CHECK(!slots.promote(1));
  auto started = slots.assign(ready, true);
  CAF_CHECK_EQUAL(started, (std::vector<std::size_t>{1}));
  CAF_CHECK_EQUAL(slots[1].running->id, "c");
  CAF_CHECK(slots[0].queued.empty());
}

CAF_TEST(a settled message makes room for the one queued behind it) {
  auto slots = make(1);
  ready.push(claimed("a", 0));
  ready.push(claimed("b", 0));
  slots.assign(ready, true);
  auto done = slots.finish_running(0);
  CAF_CHECK_EQUAL(done.id, "a");
  CAF_CHECK(slots.promote(0));
  CAF_CHECK_EQUAL(slots[0].running->id, "b");
  CAF_CHECK_EQUAL(slots[0].running_ticket, 2u);
}

CAF_TEST(a replaced executor is abandoned and the slot starts over with a new gate) {
  auto slots = make(1);
  ready.push(claimed("a", 0));
  slots.assign(ready, true);
  slots.flush();
  auto* old = fakes.made[0];
  auto old_gate = slots[0].gate;
  slots.finish_running(0);
  auto given_up = slots.replace(0);
  CAF_CHECK(old->abandoned);
  CAF_CHECK_EQUAL(given_up.get(), static_cast<executor*>(old));
  CAF_CHECK_EQUAL(slots[0].serial, 1u);
  CAF_CHECK(slots[0].gate != old_gate);
  CAF_CHECK_EQUAL(fakes.made.size(), 2u);
}

CAF_TEST(held ids and claims are found in running and queued messages) {
  auto slots = make(1);
  ready.push(claimed("a", 0, 0, 7));
  ready.push(claimed("b", 0, 1, 8));
  slots.assign(ready, true);
  std::vector<std::string> held;
  slots.ids(held);
  CAF_CHECK_EQUAL(held, (ids{"a", "b"}));
  CAF_CHECK(slots.holds_claim(7));
  CAF_CHECK(slots.holds_claim(8));
  CAF_CHECK(!slots.holds_claim(9));
}

CAF_TEST_FIXTURE_SCOPE_END()
