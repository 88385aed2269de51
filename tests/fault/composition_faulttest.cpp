// Compositions and coordination under SIGKILL of real worker processes: a pipeline whose step's
// node dies finishes once, a group whose member's node dies runs its callback once, and a slot
// held by a node that dies is free again within seconds, not at its TTL. Each task notes its
// runs in a table (troupe-test-worker).
#define CAF_SUITE composition_faults
#include <caf/test/unit_test.hpp>

#include "local_postgres.hpp"
#include "scratch_area.hpp"
#include "storage/naming.hpp"
#include "troupe/client.hpp"
#include "troupe/composition.hpp"
#include "troupe/coordination.hpp"
#include "troupe/task.hpp"

#include <fmt/format.h>
#include <signal.h>

#include <thread>

using namespace troupe;
using namespace std::chrono_literals;

namespace {

task_ref<void()> record{"record"};
task_ref<int(int, int)> slow_inc{"slow_inc"};
task_ref<void(int)> guarded_sleep{"guarded_sleep"};

struct fixture {
  testkit::scratch_area area;
  client producer{client_options{area.dsn(), area.where()}};
  std::string schema = storage::quote_identifier(area.where().schema);

  fixture() {
    area.sql().exec(fmt::format("CREATE TABLE {}.runs (message_id uuid, node text, attempt int, "
                                "at timestamptz DEFAULT clock_timestamp())",
                                schema));
  }

  std::unique_ptr<testkit::child_process> worker(const std::string& name, int concurrency,
                                                 int prefetch = 0) {
    return std::make_unique<testkit::child_process>(
      testkit::sibling_binary("troupe-test-worker"),
      std::vector<std::string>{area.dsn(), area.where().schema, "default",
                               std::to_string(concurrency), std::to_string(prefetch), "5000",
                               name});
  }

  std::int64_t count(const std::string& where) {
    return area.scalar(fmt::format("SELECT count(*) FROM {} WHERE {}", area.queue_table(), where));
  }

  std::int64_t runs(const std::string& where) {
    return area.scalar(fmt::format("SELECT count(*) FROM {}.runs WHERE {}", schema, where));
  }

  bool done(const message& m, std::chrono::milliseconds within) {
    return testkit::wait_until(
      [&] { return count(fmt::format("message_id = '{}' AND state = 'done'", m.id)) == 1; },
      within);
  }
};

} // namespace

CAF_TEST_FIXTURE_SCOPE(composition_fault_tests, fixture)

CAF_TEST(a pipeline whose step is running on a killed node finishes exactly once) {
  pipeline p(start(slow_inc, 1500, 0), then(slow_inc, 1500), then(slow_inc, 10));
  auto first = p.messages().front();
  p.run(producer);
  auto a = worker("node-a", 1);
  // The second step starts on node-a: its message exists once the first step is done.
  CAF_REQUIRE(done(first, 20s));
  CAF_REQUIRE(testkit::wait_until(
    [&] { return runs(fmt::format("node = 'node-a' AND message_id <> '{}'", first.id)) == 1; },
    20s));
  auto b = worker("node-b", 1);
  a->signal(SIGKILL);
  CAF_CHECK_EQUAL(a->wait(5s), 128 + SIGKILL);
  CAF_REQUIRE(done(p.last(), 30s));
  CAF_CHECK_EQUAL(producer.get_result<int>(p.last()), 3);
  // Three steps, each published once; the killed one ran twice, the others once.
  CAF_CHECK_EQUAL(count(fmt::format("options->>'composition_id' = '{}'", p.id())), 3);
  CAF_CHECK_EQUAL(
    count(fmt::format("options->>'composition_id' = '{}' AND state = 'done'", p.id())), 3);
  CAF_CHECK_EQUAL(runs("true"), 4);
  CAF_CHECK_EQUAL(
    area.scalar(fmt::format("SELECT count(*) FROM (SELECT message_id FROM {}.runs GROUP BY 1 "
                            "HAVING count(*) > 1) d",
                            schema)),
    1);
  b->signal(SIGTERM);
  CAF_CHECK_EQUAL(b->wait(20s), 0);
}

CAF_TEST(a group whose member is running on a killed node runs its callback exactly once) {
  std::vector<member> members;
  for (int i = 0; i < 4; ++i)
    members.emplace_back(slow_inc(1500, i));
  group g(std::move(members));
  auto callback = record();
  g.on_success(callback);
  g.run(producer);
  auto a = worker("node-a", 4);
  CAF_REQUIRE(testkit::wait_until([&] { return runs("node = 'node-a'") == 4; }, 20s));
  auto b = worker("node-b", 4);
  a->signal(SIGKILL);
  CAF_CHECK_EQUAL(a->wait(5s), 128 + SIGKILL);
  CAF_REQUIRE(done(callback, 30s));
  CAF_CHECK_EQUAL(g.get_results<int>(producer), (std::vector<int>{1, 2, 3, 4}));
  CAF_CHECK_EQUAL(g.status(producer).state, "done");
  CAF_CHECK_EQUAL(runs(fmt::format("message_id = '{}'", callback.id)), 1);
  // Let the group settle a while longer: no second callback comes.
  std::this_thread::sleep_for(1s);
  CAF_CHECK_EQUAL(count(fmt::format("message_id = '{}'", callback.id)), 1);
  CAF_CHECK_EQUAL(runs(fmt::format("message_id = '{}'", callback.id)), 1);
  b->signal(SIGTERM);
  CAF_CHECK_EQUAL(b->wait(20s), 0);
}

CAF_TEST(a slot held by a killed node is free again within seconds and not at its TTL) {
  auto m = producer.enqueue(guarded_sleep(60000));
  auto a = worker("node-a", 1);
  CAF_REQUIRE(testkit::wait_until([&] { return runs("node = 'node-a'") == 1; }, 20s));
  CAF_CHECK_EQUAL(limit_in_use(producer, concurrency("fault-guard", 1)), 1);
  auto b = worker("node-b", 1);
  a->signal(SIGKILL);
  CAF_CHECK_EQUAL(a->wait(5s), 128 + SIGKILL);
  auto killed_at = std::chrono::steady_clock::now();
  // The slot (TTL an hour) goes with node-a's row once a live node's janitor declares it dead;
  // node-b then runs the recovered message, its guard taking the slot again.
  CAF_CHECK(testkit::wait_until([&] { return runs("node = 'node-b'") == 1; }, 20s));
  CAF_CHECK(std::chrono::steady_clock::now() - killed_at < 20s);
  CAF_CHECK_EQUAL(
    area.scalar(fmt::format("SELECT count(*) FROM {}.coordination_holds h WHERE NOT EXISTS "
                            "(SELECT FROM {}.nodes n WHERE n.node_id = h.node_id)",
                            schema, schema)),
    0);
  CAF_CHECK_EQUAL(limit_in_use(producer, concurrency("fault-guard", 1)), 1);
  b->signal(SIGKILL); // its task sleeps for a minute
  CAF_CHECK_EQUAL(b->wait(5s), 128 + SIGKILL);
  (void)m;
}

CAF_TEST_FIXTURE_SCOPE_END()
