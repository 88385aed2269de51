// Groups run by a worker node: members side by side, results in submission order, callbacks
// exactly once when every member has succeeded (or once a member failed), a retried member that
// reopens its group, groups as pipeline steps and pipelines as group members, all atomic.
#define CAF_SUITE groups
#include <caf/test/unit_test.hpp>

#include "node_harness.hpp"
#include "storage/operations.hpp"
#include "troupe/admin.hpp"
#include "troupe/composition.hpp"

#include <fmt/format.h>

#include <atomic>
#include <numeric>
#include <stdexcept>

using namespace troupe;
using namespace std::chrono_literals;

namespace {

task_ref<int(int, int)> add{"add"};
task_ref<int(int)> twice{"twice"};
task_ref<int(std::vector<int>)> sum{"sum"};
task_ref<int(int)> flaky{"flaky"};
task_ref<void()> report{"report"};
task_ref<void()> raise_alarm{"raise_alarm"};

struct fixture : testkit::node_harness {
  // How often each callback ran, and whether flaky fails (until a test lets it pass).
  std::shared_ptr<std::atomic<int>> reports = std::make_shared<std::atomic<int>>(0);
  std::shared_ptr<std::atomic<int>> raised = std::make_shared<std::atomic<int>>(0);
  std::shared_ptr<std::atomic<bool>> flaky_fails = std::make_shared<std::atomic<bool>>(true);

  fixture() {
    task_options keep;
    keep.store_results = true;
    tasks->define(
      add, [](int a, int b) { return a + b; }, keep);
    tasks->define(
      twice, [](int x) { return 2 * x; }, keep);
    tasks->define(
      sum, [](std::vector<int> xs) { return std::accumulate(xs.begin(), xs.end(), 0); }, keep);
    task_options once = keep;
    once.max_retries = 0;
    tasks->define(
      flaky,
      [f = flaky_fails](int x) {
        if (f->load())
          throw std::domain_error("not yet");
        return x;
      },
      once);
    tasks->define(report, [r = reports] { ++*r; });
    tasks->define(raise_alarm, [a = raised] { ++*a; });
  }

  std::int64_t groups(const std::string& where) {
    return area.scalar(fmt::format(
      "SELECT count(*) FROM {}.{} WHERE {}", storage::quote_identifier(area.where().schema),
      storage::quote_identifier(area.where().prefix + "groups"), where));
  }

  bool row_done(const message& m) {
    return count(fmt::format("message_id = '{}' AND state = 'done'", m.id)) == 1;
  }
};

} // namespace

CAF_TEST_FIXTURE_SCOPE(groups_tests, fixture)

CAF_TEST(a group gives its results in submission order and runs its callback once) {
  std::vector<member> members;
  for (int i = 1; i <= 5; ++i)
    members.emplace_back(add(i, i));
  group g(std::move(members));
  auto callback = report();
  g.on_success(callback);
  auto published = g.run(producer);
  CAF_CHECK_EQUAL(published.size(), 5u);
  CAF_CHECK_EQUAL(g.status(producer).state, "running");
  start_node();
  CAF_CHECK(testkit::wait_until([&] { return row_done(callback); }, 20s));
  CAF_CHECK_EQUAL(g.get_results<int>(producer, true, 20s), (std::vector<int>{2, 4, 6, 8, 10}));
  auto s = g.status(producer);
  CAF_CHECK_EQUAL(s.state, "done");
  CAF_CHECK_EQUAL(s.total, 5);
  CAF_CHECK_EQUAL(s.succeeded, 5);
  CAF_CHECK(s.finished_at_ms >= s.created_at_ms);
  CAF_CHECK(g.completed(producer));
  CAF_CHECK_EQUAL(g.completed_count(producer), 5u);
  CAF_CHECK_EQUAL(reports->load(), 1);
  // Every member and the callback carry the group's id as their composition id, and the state
  // queries select them by it.
  CAF_CHECK_EQUAL(count(fmt::format("options->>'composition_id' = '{}'", g.id())), 6);
  admin ops{admin_options{area.dsn(), area.where()}};
  producer.enqueue(add(9, 9)); // not in the group
  state_query q;
  q.filter.composition_ids = {g.id()};
  q.limit = 4;
  auto page = ops.get_states(q);
  CAF_CHECK_EQUAL(page.items.size(), 4u);
  CAF_REQUIRE(page.next_after.has_value());
  q.after = page.next_after;
  CAF_CHECK_EQUAL(ops.get_states(q).items.size(), 2u);
  CAF_CHECK_EQUAL(ops.get_states_count(q.filter), 6);
  state_filter bad;
  bad.composition_ids = {"nope"};
  try {
    ops.get_states_count(bad);
    CAF_FAIL("a bad composition id was accepted");
  } catch (const error& e) {
    CAF_CHECK_EQUAL(std::string(e.what()), "composition id \"nope\" is not a UUID");
  }
}

CAF_TEST(a member that runs again does not count twice) {
  auto first = add(1, 1);
  auto later = add(2, 2).with_delay(std::chrono::hours(1));
  group g({first, later});
  g.on_success(report());
  auto published = g.run(producer);
  start_node();
  CAF_CHECK(testkit::wait_until([&] { return row_done(first); }, 20s));
  // Sent again as published (a member of its group), the member runs again, as a redelivery
  // would.
  producer.enqueue(published.front());
  CAF_CHECK(testkit::wait_until(
    [&] {
      return count(
               fmt::format("message_id = '{}' AND state = 'done' AND attempts = 2", first.id)) == 1;
    },
    20s));
  auto s = g.status(producer);
  CAF_CHECK_EQUAL(s.state, "running");
  CAF_CHECK_EQUAL(s.succeeded, 1);
  CAF_CHECK_EQUAL(count("task_name = 'report'"), 0);
  CAF_CHECK(!g.completed(producer));
}

CAF_TEST(a member that fails for good fails its group and runs the failure callbacks once) {
  auto bad = flaky(1);
  group g({add(1, 1), bad, flaky(2)});
  auto done_cb = report();
  auto failed_cb = raise_alarm();
  g.on_success(done_cb).on_failure(failed_cb);
  g.run(producer);
  start_node();
  CAF_CHECK(testkit::wait_until([&] { return count("state = 'failed'") == 2; }, 20s));
  CAF_CHECK(testkit::wait_until([&] { return row_done(failed_cb); }, 20s));
  auto s = g.status(producer);
  CAF_CHECK_EQUAL(s.state, "failed");
  CAF_CHECK_EQUAL(s.failed, 2);
  CAF_CHECK_EQUAL(s.succeeded, 1);
  // The first failure is on the group.
  CAF_CHECK(s.error_json.find("\"state\": \"failed\"") != std::string::npos);
  CAF_CHECK(s.error_json.find("not yet") != std::string::npos);
  CAF_CHECK_EQUAL(raised->load(), 1);
  CAF_CHECK_EQUAL(count(fmt::format("message_id = '{}'", done_cb.id)), 0);
}

CAF_TEST(a failed member retried by the operator reopens its group) {
  auto bad = flaky(7);
  group g({add(1, 1), bad});
  auto done_cb = report();
  g.on_success(done_cb).on_failure(raise_alarm());
  g.run(producer);
  start_node();
  CAF_CHECK(testkit::wait_until([&] { return g.status(producer).state == "failed"; }, 20s));
  CAF_CHECK(testkit::wait_until([&] { return raised->load() == 1; }, 20s));
  flaky_fails->store(false);
  admin ops{admin_options{area.dsn(), area.where()}};
  ops.retry(bad.id);
  CAF_CHECK(testkit::wait_until([&] { return row_done(done_cb); }, 20s));
  auto s = g.status(producer);
  CAF_CHECK_EQUAL(s.state, "done");
  CAF_CHECK_EQUAL(s.failed, 0);
  CAF_CHECK_EQUAL(s.error_json, "");
  CAF_CHECK_EQUAL(g.get_results<int>(producer), (std::vector<int>{2, 7}));
  CAF_CHECK_EQUAL(reports->load(), 1);
  CAF_CHECK_EQUAL(raised->load(), 1);
}

CAF_TEST(a cancelled member fails its group) {
  auto waiting = add(1, 1).with_delay(std::chrono::hours(1));
  group g({add(2, 2), waiting});
  g.on_failure(raise_alarm());
  g.run(producer);
  admin ops{admin_options{area.dsn(), area.where()}};
  ops.cancel(waiting.id);
  auto s = g.status(producer);
  CAF_CHECK_EQUAL(s.state, "failed");
  CAF_CHECK(s.error_json.find("cancelled") != std::string::npos);
  start_node();
  CAF_CHECK(testkit::wait_until([&] { return raised->load() == 1; }, 20s));
}

CAF_TEST(a group as a pipeline step passes the list of results to the next step) {
  // 1 + 2, then twice(3) and add(4, 3) side by side, then the sum of [6, 7].
  auto last = then(sum).m;
  pipeline p({add(1, 2), group({then(twice), then(add, 4)}), last});
  p.run(producer);
  start_node();
  CAF_CHECK_EQUAL(producer.get_result<int>(last, true, 20s), 13);
  CAF_CHECK_EQUAL(p.get_results_json(producer), (std::vector<std::string>{"3", "[6,7]", "13"}));
  CAF_CHECK_EQUAL(p.completed_count(producer), 3u);
  CAF_CHECK_EQUAL(count(fmt::format("options->>'composition_id' = '{}'", p.id())), 4);
  CAF_CHECK_EQUAL(count("state = 'done' AND attempts = 1"), 4);
}

CAF_TEST(a pipeline as a group member counts once its last step is done) {
  pipeline member({add(1, 1), then(twice)});
  auto last = then(sum).m;
  pipeline p({group({member, add(5, 5)}), last});
  p.run(producer);
  start_node();
  CAF_CHECK_EQUAL(producer.get_result<int>(last, true, 20s), 14); // 4 + 10
  CAF_CHECK_EQUAL(count(fmt::format("options->>'composition_id' = '{}'", p.id())), 4);
}

CAF_TEST(a member pipeline that starts with a group runs both groups) {
  // The inner group's first message is the outer group's first message too.
  auto inner_sum = then(sum).m;
  pipeline member({troupe::group({add(1, 1), add(2, 2)}), inner_sum});
  auto last = then(sum).m;
  pipeline p({troupe::group({member, add(5, 5)}), last});
  p.run(producer);
  start_node();
  CAF_CHECK_EQUAL(producer.get_result<int>(inner_sum, true, 20s), 6);
  CAF_CHECK_EQUAL(producer.get_result<int>(last, true, 20s), 16); // 6 + 10
  CAF_CHECK_EQUAL(groups("state = 'done'"), 2);
}

CAF_TEST(a group run in a rolled back transaction leaves nothing) {
  group gone({add(1, 2), add(3, 4)});
  group kept({add(5, 6)});
  auto tx = storage::connection::open(area.dsn(), "caller");
  tx.exec("BEGIN");
  gone.run_in_transaction(tx.native(), area.where());
  tx.exec("ROLLBACK");
  tx.exec("BEGIN");
  kept.run_in_transaction(tx.native(), area.where());
  tx.exec("COMMIT");
  CAF_CHECK_EQUAL(count("true"), 1);
  CAF_CHECK_EQUAL(groups("true"), 1);
  try {
    gone.status(producer);
    CAF_FAIL("a group that was rolled back has a row");
  } catch (const error& e) {
    CAF_CHECK_EQUAL(e.code(), errc::not_found);
  }
  start_node();
  CAF_CHECK(testkit::wait_until([&] { return kept.completed(producer); }, 20s));
}

CAF_TEST(the janitor purges finished groups with the retention of their state) {
  group g({add(1, 1)});
  g.run(producer);
  start_node();
  CAF_CHECK(testkit::wait_until([&] { return g.completed(producer); }, 20s));
  CAF_CHECK(testkit::wait_until(
    [&] {
      return storage::purge_finished(area.sql(), area.statements(), storage::retention{1, 0, 0},
                                     1000) >= 0 &&
             groups("true") == 0;
    },
    20s));
  CAF_CHECK_EQUAL(area.scalar(fmt::format(
                    "SELECT count(*) FROM {}.{}", storage::quote_identifier(area.where().schema),
                    storage::quote_identifier(area.where().prefix + "group_members"))),
                  0);
}

CAF_TEST(a group is refused when it is empty too large or repeats a message) {
  auto refusal = [](std::vector<member> members) {
    try {
      group g(std::move(members));
    } catch (const error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  CAF_CHECK_EQUAL(refusal({}), "a group needs at least one member");
  std::vector<member> many(1001, member(add(1, 1)));
  CAF_CHECK_EQUAL(refusal(std::move(many)), "a group has at most 1000 members, got 1001");
  auto m = add(1, 1);
  CAF_CHECK_EQUAL(refusal({m, m}), "message " + m.id + " is used more than once in the group");
  group inner({add(1, 1)});
  CAF_CHECK_EQUAL(refusal({pipeline({add(1, 1), step(inner)})}),
                  "a pipeline that is a group member must end with a message, not a group");
  group g({add(1, 1)});
  try {
    g.on_success(m).on_failure(m);
    CAF_FAIL("a callback used twice was accepted");
  } catch (const error& e) {
    CAF_CHECK_EQUAL(std::string(e.what()),
                    "message " + m.id + " is used more than once in the group");
  }
  try {
    get_group(producer, "not-a-uuid");
    CAF_FAIL("a bad group id was accepted");
  } catch (const error& e) {
    CAF_CHECK_EQUAL(std::string(e.what()), "group id \"not-a-uuid\" is not a UUID");
  }
}

CAF_TEST(a group is refused on an area without migration 6) {
  auto old = area.older_area("v5_", 5);
  client c{client_options{area.dsn(), old}};
  troupe::group g({add(1, 1)});
  auto expected = std::string("the area is at schema version 5; groups need migration 6 "
                              "(troupe upgrade)");
  try {
    g.run(c);
    CAF_FAIL("a group was published on an area at version 5");
  } catch (const error& e) {
    CAF_CHECK_EQUAL(std::string(e.what()), expected);
  }
  try {
    g.status(c);
    CAF_FAIL("a group was read on an area at version 5");
  } catch (const error& e) {
    CAF_CHECK_EQUAL(std::string(e.what()), expected);
  }
  pipeline later({add(1, 1), troupe::group({then(twice)})});
  try {
    later.run(c);
    CAF_FAIL("a pipeline with a group step was published on an area at version 5");
  } catch (const error& e) {
    CAF_CHECK_EQUAL(std::string(e.what()), expected);
  }
  CAF_CHECK_EQUAL(
    area.scalar(fmt::format("SELECT count(*) FROM {}.{}", storage::quote_identifier(old.schema),
                            storage::quote_identifier(old.prefix + "queue"))),
    0);
}

CAF_TEST_FIXTURE_SCOPE_END()
