#define CAF_SUITE consumer
#include <caf/test/unit_test.hpp>
#define FAIL(msg) CAF_FAIL(msg) // CAF 0.17.6: dsl.hpp uses an undefined FAIL()
#include <caf/test/dsl.hpp>

#include "actors/consumer.hpp"
#include "fake_executor.hpp"

#include <algorithm>
#include <optional>
#include <set>
#include <string>
#include <vector>

using namespace troupe;
using namespace troupe::actors;
using troupe::testkit::claimed;

namespace {

// A storage actor that hands out scripted claims and records what it was asked. A claim's
// locked messages go out at once; its reply waits until the test releases it, with
// `(put_atom, index, claim_result)` or `(put_atom, index, error)` (a reply must be delivered by
// the actor that promised it). Dynamically typed so it can take those; cast to storage_actor.
struct fake_storage_state {
  std::vector<std::vector<storage::claimed_message>> script;
  std::vector<std::int32_t> claims; // rows asked per claim
  std::vector<caf::response_promise> pending;
  std::vector<std::vector<storage::claimed_message>> released;
  std::vector<std::vector<std::string>> recovered;
  // The started messages each recovery asked about, and those it says the claim did not commit.
  std::vector<std::vector<std::string>> asked_committed;
  std::set<std::string> never_committed;
};

// (Functions with an argument: CAF 0.17 spawning one of no arguments trips UBSan.)
caf::behavior fake_storage(caf::stateful_actor<fake_storage_state>* self, int) {
  return {
    [=](enqueue_atom, std::vector<message>&, std::vector<enqueue_options>&) {
      return std::vector<message>{};
    },
    [=](claim_atom, const std::string&, std::int32_t, std::int32_t limit, std::int32_t,
        std::int32_t, std::uint64_t claim) {
      auto& st = self->state;
      st.claims.push_back(limit);
      if (!st.script.empty()) {
        auto batch = std::move(st.script.front());
        st.script.erase(st.script.begin());
        self->send(caf::actor_cast<caf::actor>(self->current_sender()), locked_atom_v, claim,
                   std::move(batch));
      }
      auto rp = self->make_response_promise();
      st.pending.push_back(rp);
      return rp;
    },
    [=](caf::put_atom, std::int32_t index, storage::claim_result& r) {
      self->state.pending.at(static_cast<std::size_t>(index)).deliver(std::move(r));
    },
    [=](caf::put_atom, std::int32_t index, caf::error& err) {
      self->state.pending.at(static_cast<std::size_t>(index)).deliver(std::move(err));
    },
    [=](next_eta_atom, const std::string&) { return std::int64_t{-1}; },
    [=](complete_atom, std::int32_t, const std::vector<storage::outcome>&) {
      return std::int64_t{0};
    },
    [=](release_atom, std::int32_t, std::vector<storage::claimed_message>& msgs) {
      auto n = static_cast<std::int64_t>(msgs.size());
      self->state.released.push_back(std::move(msgs));
      return n;
    },
    [=](recover_atom, std::int32_t, const std::string&, std::vector<std::string>& held,
        std::vector<storage::claimed_message>& started) {
      auto& st = self->state;
      st.recovered.push_back(std::move(held));
      storage::recovery_result r;
      std::vector<std::string> asked;
      for (const auto& m : started) {
        asked.push_back(m.id);
        if (!st.never_committed.contains(m.id))
          r.committed.push_back(m.id);
      }
      std::sort(asked.begin(), asked.end());
      st.asked_committed.push_back(std::move(asked));
      return r;
    },
  };
}

// A batcher that keeps what it is sent.
struct fake_batcher_state {
  std::vector<storage::outcome> outcomes;
};

batcher_actor::behavior_type fake_batcher(batcher_actor::stateful_pointer<fake_batcher_state> self,
                                          int) {
  return {
    [=](complete_atom, storage::outcome& out) { self->state.outcomes.push_back(std::move(out)); },
    [=](flush_atom) { return std::int64_t{0}; },
    [=](liveness_atom, bool, bool) {},
    [=](poll_atom) {},
  };
}

storage::outcome done(const std::string& id) {
  storage::outcome o;
  o.id = id;
  o.attempt = 1;
  return o;
}

struct fixture : test_coordinator_fixture<> {
  testkit::fake_executors fakes;
  caf::actor storage = sys.spawn(fake_storage, 0);
  batcher_actor batcher = sys.spawn(fake_batcher, 0);
  std::shared_ptr<task_registry> tasks = std::make_shared<task_registry>();

  std::vector<caf::actor> spawned;

  fixture() {
    tasks->define(task_ref<void()>{"job"}, [] {});
    sched.run();
  }

  ~fixture() {
    for (auto& a : spawned)
      caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
    caf::anon_send_exit(storage, caf::exit_reason::user_shutdown);
    caf::anon_send_exit(batcher, caf::exit_reason::user_shutdown);
    sched.run();
  }

  consumer_actor start(std::int32_t concurrency, std::int32_t prefetch) {
    consumer_settings cs;
    cs.queue.concurrency = concurrency;
    cs.queue.prefetch = prefetch;
    cs.node_id = 1;
    cs.registry = tasks;
    cs.storage = caf::actor_cast<storage_actor>(storage);
    cs.batcher = batcher;
    cs.executors = [this](std::shared_ptr<const std::atomic<bool>>) { return fakes.factory(); };
    auto c = spawn_consumer(sys, std::move(cs));
    spawned.push_back(caf::actor_cast<caf::actor>(c));
    return c;
  }

  fake_storage_state& db() { return deref<caf::stateful_actor<fake_storage_state>>(storage).state; }
  fake_batcher_state& written() {
    return deref<caf::stateful_actor<fake_batcher_state, batcher_actor::base>>(batcher).state;
  }
  void reply_to_claim(std::size_t index, storage::claim_result r = {}) {
    caf::anon_send(storage, caf::put_atom::value, static_cast<std::int32_t>(index), std::move(r));
  }
  void fail_claim(std::size_t index, caf::error err) {
    caf::anon_send(storage, caf::put_atom::value, static_cast<std::int32_t>(index), std::move(err));
  }
  void report(const consumer_actor& c, std::int32_t slot, const std::string& id) {
    caf::anon_send(c, executed_atom_v, slot, std::uint64_t{0}, done(id));
  }
};

using ids = std::vector<std::string>;

// Asks `c` to stop and keeps its reply.
void ask_stop(caf::event_based_actor* asker, consumer_actor c,
              std::shared_ptr<std::optional<consumer_report>> reply) {
  asker->request(c, caf::infinite, stop_atom_v).then([=](const consumer_report& r) { *reply = r; });
}

} // namespace

CAF_TEST_FIXTURE_SCOPE(consumer_tests, fixture)

CAF_TEST(a wake claims the free slots and the locked messages start in priority order) {
  db().script.push_back({claimed("later", 10), claimed("sooner", 0)});
  auto c = start(1, 2);
  sched.run();
  CAF_CHECK_EQUAL(db().claims, (std::vector<std::int32_t>{3})); // concurrency + prefetch
  CAF_REQUIRE_EQUAL(fakes.made.size(), 1u);
  CAF_CHECK_EQUAL(fakes.made[0]->sent_ids(), (ids{"sooner", "later"}));
}

CAF_TEST(outcomes wait for their claim to be written) {
  db().script.push_back({claimed("a", 0), claimed("b", 0)});
  auto c = start(1, 1);
  sched.run();
  auto* e = fakes.made[0];
  CAF_REQUIRE(e->start(1));
  report(c, 0, "a");
  sched.run();
  CAF_CHECK(written().outcomes.empty()); // the claim is not committed yet
  reply_to_claim(0);
  sched.run();
  CAF_REQUIRE_EQUAL(written().outcomes.size(), 1u);
  CAF_CHECK_EQUAL(written().outcomes[0].id, "a");
  // "b" runs now, and its outcome goes to the batcher at once.
  CAF_REQUIRE(e->start(2));
  report(c, 0, "b");
  sched.run();
  CAF_CHECK_EQUAL(written().outcomes.size(), 2u);
}

CAF_TEST(a report from a slot that does not run that message is dropped) {
  db().script.push_back({claimed("a", 0)});
  auto c = start(1, 0);
  sched.run();
  reply_to_claim(0);
  sched.run();
  report(c, 0, "not-this-one");
  caf::anon_send(c, executed_atom_v, std::int32_t{0}, std::uint64_t{7}, done("a")); // stale serial
  sched.run();
  CAF_CHECK(written().outcomes.empty());
}

CAF_TEST(a stop hands back what did not start and replies once nothing runs) {
  db().script.push_back({claimed("a", 0), claimed("b", 0), claimed("c", 0)});
  auto c = start(1, 2);
  sched.run();
  reply_to_claim(0);
  sched.run();
  CAF_REQUIRE(fakes.made[0]->start(1)); // "a" runs; "b" and "c" wait behind it
  auto reply = std::make_shared<std::optional<consumer_report>>();
  sys.spawn(ask_stop, c, reply);
  sched.run();
  CAF_REQUIRE_EQUAL(db().released.size(), 1u);
  ids back;
  for (const auto& m : db().released[0])
    back.push_back(m.id);
  CAF_CHECK_EQUAL(back, (ids{"b", "c"}));
  CAF_CHECK(!fakes.made[0]->start(2)); // taken back: it can no longer start
  CAF_CHECK(!reply->has_value());      // "a" still runs
  report(c, 0, "a");
  sched.run();
  CAF_REQUIRE(reply->has_value());
  CAF_CHECK_EQUAL((*reply)->executed, 1);
  CAF_CHECK_EQUAL((*reply)->released, 2);
  CAF_CHECK_EQUAL(written().outcomes.size(), 1u);
}

CAF_TEST(a claim lost after its messages came is followed by a recovery of what it took) {
  db().script.push_back({claimed("a", 0), claimed("b", 0)});
  auto c = start(2, 0);
  sched.run();
  CAF_REQUIRE(fakes.made[0]->start(1)); // "a" started; "b" was sent but has not started
  fail_claim(0, make_caf_error(errc::connection_lost, "gone"));
  sched.run();
  CAF_CHECK(!fakes.made[1]->start(1)); // "b" was taken back and dropped
  // The recovery hands back everything the node owns in the queue but what the consumer
  // holds: "a" runs; "b", if the claim did commit, is the node's and goes back.
  CAF_REQUIRE_EQUAL(db().recovered.size(), 1u);
  CAF_CHECK_EQUAL(db().recovered[0], (ids{"a"}));
  // No claim came while the recovery ran; one follows it after the backoff.
  CAF_CHECK_EQUAL(db().claims.size(), 1u);
}

CAF_TEST(after a lost claim only the outcomes of messages it committed are written) {
  db().script.push_back({claimed("a", 0), claimed("b", 0), claimed("c", 0)});
  auto c = start(3, 0);
  sched.run();
  for (auto* e : fakes.made)
    CAF_REQUIRE(e->start(1));
  report(c, 0, "a"); // finished before the claim's end: held
  sched.run();
  // The connection broke while the claim ended: did it commit? It did for "b" only.
  db().never_committed = {"a", "c"};
  fail_claim(0, make_caf_error(errc::connection_lost, "gone"));
  sched.run();
  CAF_REQUIRE_EQUAL(db().asked_committed.size(), 1u);
  CAF_CHECK_EQUAL(db().asked_committed[0], (ids{"a", "b", "c"}));
  auto held = db().recovered[0];
  std::sort(held.begin(), held.end());
  CAF_CHECK_EQUAL(held, (ids{"a", "b", "c"})); // none of them is handed back
  CAF_CHECK(written().outcomes.empty());       // "a" never committed: dropped
  report(c, 1, "b");
  report(c, 2, "c");
  sched.run();
  CAF_REQUIRE_EQUAL(written().outcomes.size(), 1u); // "c" is void too
  CAF_CHECK_EQUAL(written().outcomes[0].id, "b");
}

CAF_TEST(a stop while a lost claim is unresolved sends its held outcomes) {
  db().script.push_back({claimed("a", 0), claimed("b", 0)});
  auto c = start(2, 0);
  sched.run();
  for (auto* e : fakes.made)
    CAF_REQUIRE(e->start(1));
  report(c, 0, "a"); // held: the claim has not ended
  sched.run();
  // The claim's commit is lost; the stop comes before the recovery knows what it committed.
  caf::anon_send(storage, caf::put_atom::value, std::int32_t{0},
                 make_caf_error(errc::connection_lost, "gone"));
  auto reply = std::make_shared<std::optional<consumer_report>>();
  sys.spawn(ask_stop, c, reply);
  sched.run();
  report(c, 1, "b");
  sched.run();
  // Both outcomes reach the batcher, which writes them where the claim did commit.
  std::vector<std::string> sent;
  for (const auto& o : written().outcomes)
    sent.push_back(o.id);
  std::sort(sent.begin(), sent.end());
  CAF_CHECK_EQUAL(sent, (ids{"a", "b"}));
  CAF_CHECK(reply->has_value());
}

CAF_TEST(without the liveness lock nothing is claimed nor started until it is back) {
  db().script.push_back({claimed("a", 0), claimed("b", 0)});
  auto c = start(1, 1);
  sched.run();
  CAF_REQUIRE_EQUAL(db().claims.size(), 1u);
  reply_to_claim(0);
  sched.run();
  auto* e = fakes.made[0];
  CAF_REQUIRE(e->start(1)); // "a" started
  caf::anon_send(c, liveness_atom_v, false, false);
  sched.run();
  CAF_CHECK(!e->start(2)); // "b", queued behind it, was taken back
  report(c, 0, "a");       // a running attempt still finishes
  caf::anon_send(c, wake_atom_v);
  sched.run();
  CAF_CHECK_EQUAL(db().claims.size(), 1u); // no claim without the lock
  CAF_CHECK_EQUAL(written().outcomes.size(), 1u);
  // The lock is back, but the node had been declared dead: "b" is no longer its own.
  caf::anon_send(c, liveness_atom_v, true, true);
  sched.run();
  CAF_CHECK_EQUAL(db().claims.size(), 2u); // claims again
  CAF_CHECK(db().released.empty());        // "b" was dropped, not handed back
}

CAF_TEST_FIXTURE_SCOPE_END()
