// Messages going back to their queue: hand-backs, and the janitor's recovery of dead nodes.
#define CAF_SUITE queue_recovery
#include <caf/test/unit_test.hpp>

#include "queue_fixture.hpp"
#include "storage/operations.hpp"
#include "troupe/error.hpp"

#include <algorithm>
#include <set>
#include <span>
#include <thread>

using namespace troupe;
using namespace std::chrono_literals;

namespace {

using fixture = testkit::queue_fixture;
const auto& job = testkit::queue_job;

} // namespace

CAF_TEST_FIXTURE_SCOPE(queue_recovery_tests, fixture)

CAF_TEST(released messages go back as if never claimed and wake their queue) {
  for (int i = 0; i < 3; ++i)
    producer.enqueue(job(i));
  auto n = node(area.sql());
  auto c = storage::claim_batch(area.sql(), area.statements(), "default", n, 3);
  auto listener = storage::connection::open(area.dsn(), "listener");
  listener.exec("LISTEN " + storage::quote_identifier(storage::wake_channel(area.where())));
  CAF_CHECK_EQUAL(storage::release_claimed(area.sql(), area.statements(), n, c.messages), 3);
  CAF_CHECK_EQUAL(count("state = 'queued' AND attempts = 0 AND owner_node IS NULL"), 3);
  // Other nodes start them at once, not at their next poll.
  CAF_CHECK_EQUAL(wakes(listener), std::multiset<std::string>{"default"});
  // Nothing released, no wake: the next one the listener gets is a later publish's.
  CAF_CHECK_EQUAL(storage::release_claimed(area.sql(), area.statements(), n, c.messages), 0);
  producer.enqueue(job(9).on_queue("later"));
  CAF_CHECK_EQUAL(wakes(listener), std::multiset<std::string>{"later"});
}

CAF_TEST(a node whose lock stays free past the grace is dead and its messages go back) {
  for (int i = 0; i < 4; ++i)
    producer.enqueue(job(i));
  auto listener = storage::connection::open(area.dsn(), "listener");
  listener.exec("LISTEN " + storage::quote_identifier(storage::wake_channel(area.where())));
  {
    auto doomed = storage::connection::open(area.dsn(), "doomed-node");
    auto id = storage::register_node(doomed, area.statements(), who);
    auto claimed = storage::claim_batch(doomed, area.statements(), "default", id, 4).messages;
    CAF_REQUIRE_EQUAL(claimed.size(), 4u);
    // Two of them started (their starts written), two were prefetched.
    CAF_CHECK_EQUAL(storage::mark_started(doomed, area.statements(), id,
                                          {{claimed[0].id, claimed[0].attempt, 1500},
                                           {claimed[1].id, claimed[1].attempt, 1500}}),
                    2);
    // A live node is left alone.
    auto r = storage::reap_dead_nodes(area.sql(), area.statements(), 0ms);
    CAF_CHECK_EQUAL(r.recovered, 0);
    CAF_CHECK_EQUAL(r.suspect_nodes, 0);
  } // the session ends: its advisory lock is released
  // First seen without its lock: only suspect, nothing recovered yet.
  storage::reap_report first;
  CAF_CHECK(testkit::wait_until(
    [&] {
      first = storage::reap_dead_nodes(area.sql(), area.statements(), 60s);
      return first.suspect_nodes == 1;
    },
    5s));
  CAF_CHECK_EQUAL(first.recovered, 0);
  CAF_CHECK_EQUAL(count("state = 'running'"), 4);
  // Past the grace: dead, and its messages are back in the queue.
  auto second = storage::reap_dead_nodes(area.sql(), area.statements(), 0ms);
  CAF_CHECK_EQUAL(second.dead_nodes, 1);
  CAF_CHECK_EQUAL(second.recovered, 4);
  CAF_CHECK_EQUAL(second.queues, std::vector<std::string>{"default"});
  CAF_CHECK_EQUAL(wakes(listener), std::multiset<std::string>{"default"});
  // The started ones used their attempt, and say it was lost; the others used none.
  CAF_CHECK_EQUAL(count("state = 'queued' AND owner_node IS NULL AND attempts = 1 AND "
                        "error->>'type' = 'troupe::attempt_lost' AND eta <= now()"),
                  2);
  CAF_CHECK_EQUAL(
    count("state = 'queued' AND owner_node IS NULL AND attempts = 0 AND error IS NULL"), 2);
  auto again = storage::reap_dead_nodes(area.sql(), area.statements(), 0ms);
  CAF_CHECK_EQUAL(again.dead_nodes, 0);
}

CAF_TEST(a node that takes its lock back within the grace keeps its messages) {
  producer.enqueue(job(1));
  std::int32_t id = 0;
  {
    auto first_session = storage::connection::open(area.dsn(), "listener-1");
    id = storage::register_node(first_session, area.statements(), who);
    CAF_CHECK_EQUAL(
      storage::claim_batch(first_session, area.statements(), "default", id, 1).messages.size(), 1u);
  } // the listener's connection drops (say, a database restart)
  CAF_CHECK(testkit::wait_until(
    [&] { return storage::reap_dead_nodes(area.sql(), area.statements(), 60s).suspect_nodes == 1; },
    5s));
  auto second_session = storage::connection::open(area.dsn(), "listener-2");
  storage::reregister_node(second_session, area.statements(), who, id);
  auto r = storage::reap_dead_nodes(area.sql(), area.statements(), 0ms);
  CAF_CHECK_EQUAL(r.cleared_nodes, 1);
  CAF_CHECK_EQUAL(r.dead_nodes, 0);
  CAF_CHECK_EQUAL(r.recovered, 0);
  CAF_CHECK_EQUAL(count(fmt::format("state = 'running' AND owner_node = {}", id)), 1);
}

CAF_TEST(a running message whose owner has no row is recovered) {
  producer.enqueue(job(1));
  auto id = node(area.sql());
  storage::claim_batch(area.sql(), area.statements(), "default", id, 1);
  area.sql().exec(
    fmt::format("DELETE FROM {}.nodes", storage::quote_identifier(area.where().schema)));
  auto r = storage::reap_dead_nodes(area.sql(), area.statements(), 60s);
  CAF_CHECK_EQUAL(r.recovered, 1);
}

CAF_TEST_FIXTURE_SCOPE_END()
