#define CAF_SUITE claim_tracker
#include <caf/test/unit_test.hpp>

#include "actors/claim_tracker.hpp"

using namespace troupe;
using namespace troupe::actors;
using namespace std::chrono_literals;
using phase = claim_tracker::phase;

namespace {

storage::outcome done(std::string id) {
  storage::outcome o;
  o.id = std::move(id);
  o.attempt = 1;
  return o;
}

} // namespace

CAF_TEST(a claim asks for the free slots once half the capacity is free or nothing is ready) {
  claim_tracker t;
  CAF_CHECK_EQUAL(t.rows_to_claim(24, 24, false), 24);
  CAF_CHECK_EQUAL(t.rows_to_claim(12, 24, true), 12);
  CAF_CHECK_EQUAL(t.rows_to_claim(11, 24, true), 0);   // messages wait ready: keep batches large
  CAF_CHECK_EQUAL(t.rows_to_claim(11, 24, false), 11); // the executors are about to run dry
  CAF_CHECK_EQUAL(t.rows_to_claim(0, 24, false), 0);
  CAF_CHECK_EQUAL(t.rows_to_claim(1, 1, true), 1);
}

CAF_TEST(one claim at a time and none while a claim is in flight) {
  claim_tracker t;
  auto first = t.begin(10);
  CAF_CHECK_EQUAL(first, 1u);
  CAF_CHECK(t.in_flight());
  CAF_CHECK_EQUAL(t.rows_in_flight(), 10);
  CAF_CHECK_EQUAL(t.rows_to_claim(24, 24, false), 0);
  CAF_CHECK(t.locked(first, 4));
  CAF_CHECK(t.state() == phase::locked);
  CAF_CHECK_EQUAL(t.rows_in_flight(), 0); // the rows are here now, in the ready list
  t.succeeded(0);
  CAF_CHECK(t.state() == phase::idle);
  CAF_CHECK_EQUAL(t.begin(5), 2u);
}

CAF_TEST(messages of a claim that is not the one in flight are refused) {
  claim_tracker t;
  auto claim = t.begin(3);
  CAF_CHECK(!t.locked(claim + 1, 3));
  t.succeeded(0);
  CAF_CHECK(!t.locked(claim, 3)); // given up: its reply already came
}

CAF_TEST(a full claim means more may be ready and a short one means none is) {
  claim_tracker t;
  auto c = t.begin(4);
  t.locked(c, 4);
  auto end = t.succeeded(0);
  CAF_CHECK_EQUAL(end.got, 4u);
  CAF_CHECK(end.more);
  CAF_CHECK(t.maybe_more());
  c = t.begin(4);
  t.locked(c, 1);
  end = t.succeeded(0);
  CAF_CHECK(!end.more);
  CAF_CHECK(!t.maybe_more());
  CAF_CHECK_EQUAL(t.rows_to_claim(4, 4, false), 0); // nothing may have come since
  t.something_changed();
  CAF_CHECK_EQUAL(t.rows_to_claim(4, 4, false), 4);
}

CAF_TEST(a wake while a claim is in flight makes a short claim claim again) {
  claim_tracker t;
  t.begin(4);
  t.something_changed(); // rows may have committed after the claim looked
  auto end = t.succeeded(1);
  CAF_CHECK(end.more);
  CAF_CHECK(t.maybe_more());
}

CAF_TEST(outcomes of a locked claim are held until its reply) {
  claim_tracker t;
  auto c = t.begin(2);
  CAF_CHECK(!t.must_hold(c)); // nothing came yet
  t.locked(c, 2);
  CAF_CHECK(t.must_hold(c));
  CAF_CHECK(!t.must_hold(c - 1)); // an earlier claim is written
  t.outcome_pending();
  t.hold(done("a"));
  CAF_CHECK_EQUAL(t.unsettled(), 1);
  t.succeeded(0);
  CAF_CHECK(!t.must_hold(c));
  auto held = t.take_held();
  CAF_REQUIRE_EQUAL(held.size(), 1u);
  CAF_CHECK_EQUAL(held[0].id, "a");
  CAF_CHECK(t.take_held().empty());
}

CAF_TEST(a claim the database refused drops its held outcomes and is remembered) {
  claim_tracker t;
  auto c = t.begin(2);
  t.locked(c, 2);
  t.outcome_pending();
  t.hold(done("a"));
  CAF_CHECK_EQUAL(t.failed(claim_tracker::failure::rolled_back), 1u);
  CAF_CHECK(t.take_held().empty());
  CAF_CHECK_EQUAL(t.unsettled(), 0);
  CAF_CHECK(t.rolled_back(c));
  t.forget_rolled_back([&](std::uint64_t claim) { return claim == c; }); // still running
  CAF_CHECK(t.rolled_back(c));
  t.forget_rolled_back([](std::uint64_t) { return false; });
  CAF_CHECK(!t.rolled_back(c));
}

CAF_TEST(a claim whose outcome is unknown holds its outcomes until the recovery knows) {
  claim_tracker t;
  auto c = t.begin(3);
  t.locked(c, 3);
  t.outcome_pending();
  t.hold(done("a"));
  t.outcome_pending();
  t.hold(done("b"));
  CAF_CHECK_EQUAL(t.failed(claim_tracker::failure::unknown), 0u);
  CAF_CHECK(!t.rolled_back(c));
  CAF_CHECK(t.uncertain() == c);
  CAF_CHECK(t.take_held().empty()); // not before the recovery knows
  CAF_CHECK(t.must_hold(c));        // later outcomes of the claim wait too
  CAF_CHECK_EQUAL(t.held_attempts().size(), 2u);
  // The claim committed "b" (finished) and "c" (still running), not "a" nor "d".
  auto send = t.resolve_uncertain({"b", "c"}, {"c", "d"});
  CAF_REQUIRE_EQUAL(send.size(), 1u);
  CAF_CHECK_EQUAL(send[0].id, "b");
  CAF_CHECK_EQUAL(t.unsettled(), 1); // "a" dropped
  CAF_CHECK(!t.uncertain());
  CAF_CHECK(!t.must_hold(c));
  CAF_CHECK(!t.take_void(c, "c"));
  CAF_CHECK(!t.take_void(c + 1, "d")); // a later claim's delivery of "d" counts
  CAF_CHECK(t.take_void(c, "d"));
  CAF_CHECK(!t.take_void(c, "d")); // forgotten once taken
}

CAF_TEST(a failed claim is recovered before the next and the backoff doubles up to 5 s) {
  claim_tracker t;
  std::vector<std::chrono::milliseconds> backoffs;
  for (int i = 0; i < 8; ++i) {
    t.begin(1);
    t.failed(claim_tracker::failure::unknown);
    CAF_CHECK(t.state() == phase::must_recover);
    CAF_CHECK_EQUAL(t.rows_to_claim(1, 1, false), 0);
    backoffs.push_back(t.backoff());
    t.begin_recovery();
    t.recovery_done();
  }
  CAF_CHECK_EQUAL(backoffs.front(), 100ms);
  CAF_CHECK_EQUAL(backoffs[1], 200ms);
  CAF_CHECK_EQUAL(backoffs.back(), 5000ms);
  t.begin(1);
  t.succeeded(1);
  CAF_CHECK_EQUAL(t.backoff(), 0ms);
}

CAF_TEST(nothing begins before the backoff has passed) {
  claim_tracker t;
  auto now = std::chrono::steady_clock::time_point{} + 1h;
  CAF_CHECK_EQUAL(t.held_off_for(now), 0ms); // no failure yet
  t.begin(1);
  t.failed(claim_tracker::failure::unknown);
  t.begin_recovery();
  t.recovery_done();
  t.hold_off(now);
  CAF_CHECK_EQUAL(t.held_off_for(now), 100ms);
  CAF_CHECK_EQUAL(t.held_off_for(now + 60ms), 40ms);
  CAF_CHECK_EQUAL(t.held_off_for(now + 100ms), 0ms);
}

CAF_TEST(a failed recovery waits and is tried again) {
  claim_tracker t{true}; // a replacement consumer: recover first
  CAF_CHECK(t.state() == phase::must_recover);
  t.begin_recovery();
  t.settled_during_recovery("x");
  CAF_CHECK_EQUAL(t.completed_during_recovery().size(), 1u);
  t.recovery_failed();
  CAF_CHECK(t.state() == phase::must_recover);
  CAF_CHECK_EQUAL(t.backoff(), 100ms);
  t.begin_recovery();
  CAF_CHECK(t.completed_during_recovery().empty());
  t.recovery_done();
  CAF_CHECK(t.state() == phase::idle);
  t.settled_during_recovery("y"); // not recovering: not recorded
  CAF_CHECK(t.completed_during_recovery().empty());
}

CAF_TEST(the eta is probed only after a short claim and only when it may be stale) {
  claim_tracker t;
  CAF_CHECK(!t.should_probe()); // more may be ready: a claim comes first
  auto c = t.begin(4);
  auto generation = t.generation();
  t.locked(c, 1);
  t.succeeded(0);
  CAF_CHECK(t.should_probe());
  t.eta_known(generation); // the claim's own answer covered it
  CAF_CHECK(!t.should_probe());
  t.something_changed();        // a wake: the queue may hold new delayed rows...
  CAF_CHECK(!t.should_probe()); // ...and ready ones: a claim first
  c = t.begin(4);
  t.succeeded(0);
  CAF_CHECK(t.should_probe());
  auto g = t.begin_probe();
  CAF_CHECK(!t.should_probe()); // one probe at a time
  t.end_probe();
  t.eta_known(g);
  CAF_CHECK(!t.should_probe());
  // The probe found nothing due later: one more claim, and no probe after it.
  t.may_have_come_due();
  CAF_CHECK(t.maybe_more());
  CAF_CHECK_EQUAL(t.generation(), g);
  c = t.begin(4);
  t.succeeded(0);
  CAF_CHECK(!t.maybe_more());
  CAF_CHECK(!t.should_probe());
}

CAF_TEST(a settled retry means its row is queued again) {
  claim_tracker t;
  t.outcome_pending();
  t.outcome_sent(false);
  t.outcome_pending();
  t.outcome_sent(true);
  CAF_CHECK_EQUAL(t.unsettled(), 2);
  CAF_CHECK(!t.outcomes_settled(1)); // the first, a success
  CAF_CHECK(t.outcomes_settled(1));  // the retry
  CAF_CHECK_EQUAL(t.unsettled(), 0);
  CAF_CHECK(!t.outcomes_settled(1));
}

CAF_TEST(an eta probe that keeps failing waits a growing backoff) {
  claim_tracker t;
  auto now = std::chrono::steady_clock::now();
  CAF_CHECK_EQUAL(t.probe_held_off_for(now).count(), 0);
  std::vector<std::int64_t> waits;
  for (int i = 0; i < 8; ++i) {
    t.probe_failed(now);
    waits.push_back(t.probe_held_off_for(now).count());
  }
  CAF_CHECK_EQUAL(waits, (std::vector<std::int64_t>{100, 200, 400, 800, 1600, 3200, 5000, 5000}));
  CAF_CHECK_EQUAL(t.probe_held_off_for(now + std::chrono::seconds(5)).count(), 0);
  t.probe_succeeded();
  t.probe_failed(now);
  CAF_CHECK_EQUAL(t.probe_held_off_for(now).count(), 100);
}
