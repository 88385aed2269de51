// Attempt history: opt-in per area, one record per started execution written by the node's own
// completion and recovery statements, none for what never started, an incomplete record
// for an attempt lost with its node; paging and purge.
#define CAF_SUITE history
#include <caf/test/unit_test.hpp>

#include "node_harness.hpp"
#include "storage/naming.hpp"
#include "storage/operations.hpp"
#include "storage/queries.hpp"
#include "troupe/admin.hpp"
#include "troupe/error.hpp"
#include "troupe/options.hpp"

#include <fmt/format.h>

#include <atomic>

using namespace troupe;
using namespace std::chrono_literals;

namespace {

task_ref<int(int)> ok{"ok"};
task_ref<int()> flaky{"flaky"};
task_ref<void()> slow{"slow"};

struct fixture : testkit::node_harness {
  admin ops{admin_options{area.dsn(), area.where()}};
  std::shared_ptr<std::atomic<int>> flaky_calls = std::make_shared<std::atomic<int>>(0);

  fixture() {
    task_options keep;
    keep.store_results = true;
    tasks->define(
      ok, [](int x) { return x; }, keep);
    task_options retried = keep;
    retried.min_backoff = 50ms;
    retried.max_backoff = 100ms;
    auto calls = flaky_calls;
    tasks->define(
      flaky,
      [calls] {
        if (calls->fetch_add(1) == 0)
          throw std::runtime_error("first try fails");
        return 3;
      },
      retried);
    tasks->define(slow, [] {});
  }

  std::int64_t records(const std::string& where = "true") {
    return area.scalar(fmt::format("SELECT count(*) FROM {}.{}attempts WHERE {}",
                                   area.where().schema, area.where().prefix, where));
  }
};

} // namespace

CAF_TEST_FIXTURE_SCOPE(history_tests, fixture)

CAF_TEST(attempt history is off until turned on and then records every started attempt) {
  CAF_CHECK(!ops.attempt_history().enabled);
  start_node();
  auto before = producer.enqueue(ok(1));
  CAF_CHECK_EQUAL(producer.get_result<int>(before, true, 20s), 1);
  CAF_CHECK_EQUAL(records(), 0);
  auto on = ops.set_attempt_history(true);
  CAF_CHECK(on.enabled);
  CAF_CHECK_EQUAL(ops.set_attempt_history(true).changed_at_ms, on.changed_at_ms); // idempotent
  auto a = producer.enqueue(ok(2));
  auto f = producer.enqueue(flaky());
  CAF_CHECK_EQUAL(producer.get_result<int>(a, true, 20s), 2);
  CAF_CHECK_EQUAL(producer.get_result<int>(f, true, 20s), 3);
  stop();
  auto one = ops.history(a.id);
  CAF_REQUIRE_EQUAL(one.items.size(), 1u);
  CAF_CHECK_EQUAL(one.items[0].outcome, "success");
  CAF_CHECK_EQUAL(one.items[0].attempt, 1);
  CAF_CHECK_EQUAL(one.items[0].task, "ok");
  CAF_CHECK_EQUAL(one.items[0].queue, "default");
  CAF_CHECK(one.items[0].node_id.has_value());
  CAF_CHECK(one.items[0].finished_at_ms.has_value());
  CAF_CHECK(one.items[0].duration_ms.has_value());
  CAF_CHECK(!one.next_after);
  // The failed attempt, then the one that succeeded, in order; the failure's type and text.
  auto two = ops.history(f.id);
  CAF_REQUIRE_EQUAL(two.items.size(), 2u);
  CAF_CHECK_EQUAL(two.items[0].attempt, 1);
  CAF_CHECK_EQUAL(two.items[0].outcome, "failure");
  CAF_CHECK_EQUAL(two.items[0].error_text, "first try fails");
  CAF_CHECK(!two.items[0].error_type.empty());
  CAF_CHECK_EQUAL(two.items[1].attempt, 2);
  CAF_CHECK_EQUAL(two.items[1].outcome, "success");
  CAF_CHECK_LESS(*two.items[0].attempt_id, *two.items[1].attempt_id);
  // The message before history was on has none; off again, nothing more is written.
  CAF_CHECK(ops.history(before.id).items.empty());
  CAF_CHECK(!ops.set_attempt_history(false).enabled);
  start_node();
  auto after = producer.enqueue(ok(3));
  CAF_CHECK_EQUAL(producer.get_result<int>(after, true, 20s), 3);
  CAF_CHECK(ops.history(after.id).items.empty());
}

CAF_TEST(what never started leaves no record and an attempt lost with its node stays incomplete) {
  ops.set_attempt_history(true);
  storage::node_identity who{"doomed", "host", 1, {"default"}};
  std::vector<std::string> ids;
  std::int32_t doomed_id = 0;
  for (int i = 0; i < 4; ++i)
    ids.push_back(producer.enqueue(ok(i)).id);
  {
    auto doomed = storage::connection::open(area.dsn(), "doomed-node");
    auto n = storage::register_node(doomed, area.statements(), who);
    doomed_id = n;
    std::vector<storage::claimed_message> got;
    // One handed to an idle executor by the claim (its start written with it), one started a
    // second later (mark_started), two prefetched and never started.
    storage::claim_batch_early(doomed, area.statements(), "default", n, 4, 0, 1,
                               [&](std::vector<storage::claimed_message> m) {
                                 for (auto& x : m)
                                   got.push_back(std::move(x));
                               });
    CAF_REQUIRE_EQUAL(got.size(), 4u);
    std::vector<storage::started_attempt> later = {{got[1].id, got[1].attempt, 1000}};
    CAF_CHECK_EQUAL(storage::mark_started(doomed, area.statements(), n, later), 1);
    // Running attempts have no record yet: the list shows them from their rows, last.
    CAF_CHECK_EQUAL(records(), 0);
    auto running = ops.history(got[0].id);
    CAF_REQUIRE_EQUAL(running.items.size(), 1u);
    CAF_CHECK(!running.items[0].attempt_id);
    CAF_CHECK_EQUAL(running.items[0].outcome, "incomplete");
    CAF_CHECK_EQUAL(running.items[0].node_id, std::optional<std::int32_t>(n));
    CAF_CHECK(ops.history(got[3].id).items.empty()); // prefetched, not started
    // A cancel of a prefetched one before it starts: an outcome that never ran.
    storage::outcome never;
    never.id = got[2].id;
    never.attempt = got[2].attempt;
    never.state = storage::outcome_state::cancelled;
    never.ran_ms = -1;
    CAF_CHECK_EQUAL(storage::complete_batch(doomed, area.statements(), n, {never}), 1);
    CAF_CHECK_EQUAL(records(), 0);
  } // the node's session ends: it is dead
  // Its server session ends a moment after the client closes it: until then its lock is held.
  CAF_REQUIRE(testkit::wait_until(
    [&] {
      return area.scalar(fmt::format("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' "
                                     "AND classid = {} AND objid = {} AND objsubid = 2",
                                     storage::node_lock_class(area.where()), doomed_id)) == 0;
    },
    10s));
  storage::reap_dead_nodes(area.sql(), area.statements(), 60s);
  auto r = storage::reap_dead_nodes(area.sql(), area.statements(), 0ms);
  CAF_CHECK_EQUAL(r.dead_nodes, 1);
  // The two started attempts are recorded, incomplete for ever; the prefetched ones have none.
  CAF_CHECK_EQUAL(records("finished_at IS NULL AND outcome IS NULL"), 2);
  for (int i : {0, 1}) {
    auto h = ops.history(ids[static_cast<std::size_t>(i)]);
    CAF_REQUIRE_EQUAL(h.items.size(), 1u);
    CAF_CHECK(h.items[0].attempt_id.has_value());
    CAF_CHECK_EQUAL(h.items[0].node_id, std::optional<std::int32_t>(doomed_id));
    CAF_CHECK_EQUAL(h.items[0].outcome, "incomplete");
    CAF_CHECK(!h.items[0].finished_at_ms);
    CAF_CHECK(!h.items[0].duration_ms);
  }
  CAF_CHECK(ops.history(ids[2]).items.empty());
  CAF_CHECK(ops.history(ids[3]).items.empty());
  // Run again by a live node: the lost attempt stays, the new one follows it.
  start_node();
  CAF_CHECK(testkit::wait_until([&] { return count("state = 'done'") == 3; }, 20s));
  stop();
  auto h = ops.history(ids[0]);
  CAF_REQUIRE_EQUAL(h.items.size(), 2u);
  CAF_CHECK_EQUAL(h.items[0].outcome, "incomplete");
  CAF_CHECK_EQUAL(h.items[1].outcome, "success");
  CAF_CHECK_EQUAL(h.items[1].attempt, 2);
  CAF_CHECK_EQUAL(ops.history(ids[3]).items.size(), 1u);
}

CAF_TEST(a skip by the age limit leaves no record) {
  ops.set_attempt_history(true);
  // Older than its age limit (1 ms) by the time a node runs it.
  auto m = slow().with_delay(50ms);
  m.options_json = with_option(m.options_json, "max_age", std::int64_t{1});
  producer.enqueue(m);
  start_node();
  CAF_CHECK(testkit::wait_until([&] { return count("state = 'failed'") == 1; }, 20s));
  stop();
  auto m_state = ops.get_state(m.id);
  CAF_REQUIRE(static_cast<bool>(m_state));
  CAF_CHECK_EQUAL(m_state->status, "skipped");
  CAF_CHECK(ops.history(m.id).items.empty());
}

CAF_TEST(history pages by attempt id and purges by age) {
  ops.set_attempt_history(true);
  auto f = producer.enqueue(flaky());
  start_node();
  CAF_CHECK_EQUAL(producer.get_result<int>(f, true, 20s), 3);
  stop();
  auto first = ops.history(f.id, std::nullopt, 1);
  CAF_REQUIRE_EQUAL(first.items.size(), 1u);
  CAF_REQUIRE(first.next_after.has_value());
  auto second = ops.history(f.id, first.next_after, 1);
  CAF_REQUIRE_EQUAL(second.items.size(), 1u);
  CAF_CHECK(!second.next_after);
  CAF_CHECK_EQUAL(second.items[0].outcome, "success");
  // The older record goes, the newer stays, and the queue's row is untouched.
  area.sql().exec(fmt::format("UPDATE {}.{}attempts SET started_at = started_at - interval "
                              "'2 days', finished_at = finished_at - interval '2 days' "
                              "WHERE attempt_id = {}",
                              area.where().schema, area.where().prefix,
                              *first.items[0].attempt_id));
  CAF_CHECK_EQUAL(ops.purge_history("1 day"), 1);
  CAF_CHECK_EQUAL(ops.history(f.id).items.size(), 1u);
  auto f_state = ops.get_state(f.id);
  CAF_REQUIRE(static_cast<bool>(f_state));
  CAF_CHECK_EQUAL(f_state->status, "success");
  try {
    ops.purge_history("-1 day");
    CAF_FAIL("a negative age was taken");
  } catch (const error& e) {
    CAF_CHECK_EQUAL(e.code(), errc::invalid_argument);
  }
  try {
    ops.history(f.id, std::nullopt, 0);
    CAF_FAIL("a limit of 0 was taken");
  } catch (const error& e) {
    CAF_CHECK_EQUAL(e.code(), errc::invalid_argument);
  }
}

CAF_TEST_FIXTURE_SCOPE_END()
