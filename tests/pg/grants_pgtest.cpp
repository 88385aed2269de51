// Least privilege (admin::grants_sql, `troupe sql grants`): a producer, a worker node and an
// operator, each a login role with only the script's grants, each does its job through
// Troupe's own calls, and each is refused what belongs to the others or to the area's owner.
#define CAF_SUITE grants
#include <caf/test/unit_test.hpp>

#include "node_harness.hpp"
#include "storage/queries.hpp"
#include "troupe/admin.hpp"
#include "troupe/composition.hpp"
#include "troupe/coordination.hpp"
#include "troupe/error.hpp"

#include <fmt/format.h>

using namespace troupe;
using namespace std::chrono_literals;

namespace {

task_ref<int(int)> twice{"twice"};

struct fixture : testkit::node_harness {
  area_roles roles;

  fixture() {
    // Roles are the cluster's: named after this test's schema, so that tests running beside
    // this one never share them.
    const auto& s = area.where().schema;
    roles = {s + "_producer", s + "_node", s + "_operator"};
    for (const auto* r : {&roles.producer, &roles.node, &roles.operator_role})
      area.sql().exec(fmt::format("CREATE ROLE {} LOGIN", storage::quote_identifier(*r)));
    area.sql().exec(admin::grants_sql(area.where(), roles));
    task_options keep;
    keep.store_results = true;
    tasks->define(
      twice, [](int x) { return 2 * x; }, keep);
  }

  ~fixture() {
    if (node)
      stop();
    // A role that still holds privileges cannot be dropped: take them back first.
    for (const auto* r : {&roles.producer, &roles.node, &roles.operator_role}) {
      auto q = storage::quote_identifier(*r);
      try {
        area.sql().exec(fmt::format("DROP OWNED BY {}; DROP ROLE {}", q, q));
      } catch (const std::exception& e) {
        CAF_MESSAGE("could not drop role " << *r << ": " << e.what());
      }
    }
  }

  std::string dsn_of(const std::string& role) const { return area.dsn() + " user=" + role; }

  // Whether `sql`, run as `role`, is refused for lack of privilege (SQLSTATE 42501).
  bool refused(const std::string& role, const std::string& sql) {
    auto c = storage::connection::open(dsn_of(role), "grants-test");
    try {
      c.exec(sql, "grants-test");
    } catch (const error& e) {
      if (e.sqlstate() == "42501")
        return true;
      CAF_MESSAGE("as " << role << ", " << sql << " failed otherwise: " << e.what());
      return false;
    }
    CAF_MESSAGE("as " << role << ", " << sql << " was allowed");
    return false;
  }

  std::string table(const std::string& name) const {
    return storage::quote_identifier(area.where().schema) + "." +
           storage::quote_identifier(area.where().prefix + name);
  }
};

} // namespace

CAF_TEST_FIXTURE_SCOPE(grants_tests, fixture)

CAF_TEST(each role does its job with the grants alone) {
  // The producer publishes: one, a batch, a deduplicated one, an id sent again.
  client producer_client{client_options{dsn_of(roles.producer), area.where()}};
  auto one = producer_client.enqueue(twice(1));
  auto batch = producer_client.enqueue_many({twice(2), twice(3)});
  enqueue_options keyed;
  keyed.deduplication_key = "only-once";
  keyed.deduplication_ttl = 60s;
  auto first = producer_client.enqueue(twice(4), keyed);
  auto again = producer_client.enqueue(twice(5), keyed);
  CAF_CHECK_EQUAL(again.id, first.id);
  producer_client.enqueue(one); // the same id again
  // The node runs them.
  auto o = options();
  o.dsn = dsn_of(roles.node);
  start_node(o);
  CAF_CHECK_EQUAL(producer_client.get_result<int>(one, true, 20s), 2);
  CAF_CHECK_EQUAL(producer_client.get_result<int>(batch[1], true, 20s), 6);
  CAF_CHECK_EQUAL(producer_client.get_result<int>(first, true, 20s), 8);
  // The operator: pause and resume, cancel, the states, attempt history, purge, recover.
  admin ops{admin_options{dsn_of(roles.operator_role), area.where()}};
  CAF_CHECK(ops.pause("default").paused);
  CAF_CHECK(testkit::wait_until([&] { return ops.queue_status("default").at(0).paused; }, 5s));
  auto held = producer_client.enqueue(twice(6));
  CAF_CHECK_EQUAL(to_string(ops.cancel(held.id).outcome), std::string("cancelled"));
  CAF_CHECK(!ops.resume("default").paused);
  auto one_state = ops.get_state(one.id);
  CAF_REQUIRE(static_cast<bool>(one_state));
  CAF_CHECK_EQUAL(one_state->status, "success");
  CAF_CHECK_EQUAL(ops.get_states_count({}), 5);
  CAF_CHECK(ops.set_attempt_history(true).enabled);
  auto later = producer_client.enqueue(twice(7));
  CAF_CHECK_EQUAL(producer_client.get_result<int>(later, true, 20s), 14);
  CAF_CHECK(testkit::wait_until([&] { return !ops.history(later.id).items.empty(); }, 5s));
  CAF_CHECK_EQUAL(ops.purge("1 day"), 0);
  CAF_CHECK_EQUAL(ops.recover().dead_nodes, 0);
  CAF_CHECK(!ops.stats().empty());
  CAF_CHECK_EQUAL(ops.failed().items.size(), 0u);
  // Groups: the producer publishes one and reads its row, the node's completions finish it
  // (the triggers write with the area owner's rights) and publish its callback.
  troupe::group g({twice(8), twice(9)});
  auto callback = twice(10);
  g.on_success(callback);
  g.run(producer_client);
  CAF_CHECK_EQUAL(producer_client.get_result<int>(callback, true, 20s), 20);
  CAF_CHECK_EQUAL(g.status(producer_client).state, "done");
  CAF_CHECK_EQUAL(g.get_results<int>(producer_client), (std::vector<int>{16, 18}));
  // Coordination: the node claims messages under limits and gives their slots back; the
  // producer takes and gives back a guard's slot, reads a limiter, and passes a barrier.
  auto limited = producer_client.enqueue(
    twice(11).with_limits({concurrency("grants", 1)}).with_concurrency_key("k"));
  CAF_CHECK_EQUAL(producer_client.get_result<int>(limited, true, 20s), 22);
  {
    limit_guard slot(producer_client, concurrency("grants", 1));
    CAF_CHECK_EQUAL(limit_in_use(producer_client, concurrency("grants", 1)), 1);
  }
  CAF_CHECK_EQUAL(limit_in_use(producer_client, concurrency("grants", 1)), 0);
  barrier b(producer_client, "grants-barrier");
  CAF_CHECK(b.create(1));
  CAF_CHECK(b.wait(5s));
  CAF_CHECK_GREATER_OR_EQUAL(ops.purge("1 day"), 0);
}

CAF_TEST(each role is refused what is not its job) {
  auto queue = table("queue");
  // The producer claims nothing, deletes nothing, reads no node or attempt, pauses nothing.
  CAF_CHECK(refused(roles.producer, "SELECT attempts, owner_node FROM " + queue));
  CAF_CHECK(refused(roles.producer, "SELECT * FROM " + table("attempts")));
  CAF_CHECK(refused(roles.producer, "UPDATE " + queue + " SET attempts = 1"));
  CAF_CHECK(refused(roles.producer, "DELETE FROM " + queue));
  CAF_CHECK(refused(roles.producer, "SELECT * FROM " + table("nodes")));
  CAF_CHECK(refused(roles.producer, "INSERT INTO " + table("queue_control") +
                                      " (queue_name, paused) VALUES ('default', true)"));
  // The node pauses nothing, changes no area setting, and no table.
  CAF_CHECK(refused(roles.node, "INSERT INTO " + table("queue_control") +
                                  " (queue_name, paused) VALUES ('default', true)"));
  CAF_CHECK(
    refused(roles.node, "UPDATE " + table("area_settings") + " SET attempt_history = true"));
  CAF_CHECK(refused(roles.node, "CREATE TABLE " + storage::quote_identifier(area.where().schema) +
                                  ".extra (x int)"));
  CAF_CHECK(refused(roles.node, "DROP TABLE " + table("attempts")));
  // The operator changes rows, never the area's structure.
  CAF_CHECK(
    refused(roles.operator_role,
            "CREATE TABLE " + storage::quote_identifier(area.where().schema) + ".extra (x int)"));
  CAF_CHECK(refused(roles.operator_role, "TRUNCATE " + queue));
  CAF_CHECK(refused(roles.operator_role, "ALTER TABLE " + queue + " ADD COLUMN extra int"));
  CAF_CHECK(refused(roles.operator_role,
                    "DROP INDEX " + storage::quote_identifier(area.where().schema) + "." +
                      storage::quote_identifier(area.where().prefix + "queue_history_idx")));
  // A claim through Troupe's own statement, as the producer: refused.
  auto c = storage::connection::open(dsn_of(roles.producer), "grants-test");
  try {
    storage::claim_batch_early(c, area.statements(), "default", 1, 1, 0, 0,
                               [](std::vector<storage::claimed_message>) {});
    CAF_FAIL("the producer claimed");
  } catch (const error& e) {
    CAF_CHECK_EQUAL(e.sqlstate(), "42501");
  }
}

CAF_TEST_FIXTURE_SCOPE_END()
