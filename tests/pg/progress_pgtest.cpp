// Progress reported by running tasks (task_context::set_progress): visible in the state record
// while the task runs and after it ends, coalesced to one row version per write however often
// the task reports, and never a reason for the task to fail.
#define CAF_SUITE progress
#include <caf/test/unit_test.hpp>

#include "scratch_area.hpp"
#include "storage/naming.hpp"
#include "troupe/admin.hpp"
#include "troupe/caf.hpp"
#include "troupe/client.hpp"
#include "troupe/error.hpp"

#include <fmt/format.h>

#include <atomic>
#include <thread>

using namespace troupe;
using namespace std::chrono_literals;

namespace {

task_ref<std::int64_t(int)> busy{"busy"};
task_ref<int()> careless{"careless"};
task_ref<int()> patient{"patient"};

std::atomic<bool> release_patient{false};

struct fixture {
  testkit::scratch_area area;
  client producer{client_options{area.dsn(), area.where()}};
  admin ops{admin_options{area.dsn(), area.where()}};
  caf::actor_system_config cfg;
  std::unique_ptr<caf::actor_system> sys;
  std::shared_ptr<task_registry> tasks = std::make_shared<task_registry>();

  fixture() {
    release_patient = false;
    sys = std::make_unique<caf::actor_system>(cfg);
    task_options keep;
    keep.store_results = true;
    // Reports in a tight loop for `ms` milliseconds, then reports its count as JSON.
    tasks->define(
      busy,
      [](task_context& ctx, int ms) {
        std::int64_t calls = 0;
        auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
        while (std::chrono::steady_clock::now() < until) {
          ctx.set_progress(static_cast<double>(calls % 1000) / 1000.0);
          ++calls;
        }
        ctx.set_progress(fmt::format(R"({{"calls": {}}})", calls));
        return calls;
      },
      keep);
    // Reports what cannot be stored, then a good value.
    tasks->define(
      careless,
      [](task_context& ctx) {
        ctx.set_progress(2.0);
        ctx.set_progress(-0.5);
        ctx.set_progress(std::nan(""));
        ctx.set_progress(std::string_view("not json {"));
        ctx.set_progress(std::string_view("[1] [2]"));
        ctx.set_progress(std::string(5000, ' ') + "1");
        ctx.set_progress(0.25);
        return 7;
      },
      keep);
    // Reports until the test lets it go.
    tasks->define(
      patient,
      [](task_context& ctx) {
        auto until = std::chrono::steady_clock::now() + 30s;
        double p = 0;
        while (!release_patient && std::chrono::steady_clock::now() < until) {
          ctx.set_progress(p);
          p = p < 0.9 ? p + 0.01 : 0;
          std::this_thread::sleep_for(1ms);
        }
        ctx.set_progress(1.0);
        return 9;
      },
      keep);
  }

  node_options options() {
    node_options o;
    o.dsn = area.dsn();
    o.area = area.where();
    o.name = "progress-node";
    queue_options q;
    q.concurrency = 1;
    q.prefetch = 1;
    o.queues.push_back(q);
    o.shutdown_grace = 5s;
    return o;
  }

  void stop(const node_actor& node) {
    release_patient = true;
    caf::scoped_actor self{*sys};
    self->request(node, 30s, stop_atom_v)
      .receive([](const node_report&) {},
               [](caf::error& e) { CAF_FAIL("stop failed: " << describe(e)); });
  }

  std::int64_t updates_counted() {
    return area.scalar("SELECT coalesce(sum(n), 0)::bigint FROM " + area.where().schema +
                       ".row_versions");
  }

  // The queue table's updates as PostgreSQL's statistics count them.
  std::int64_t updates_in_statistics() {
    area.sql().exec("SELECT pg_stat_clear_snapshot()");
    return area.scalar(fmt::format("SELECT n_tup_upd FROM pg_stat_user_tables WHERE relid = "
                                   "'{}'::regclass",
                                   area.queue_table()));
  }
};

} // namespace

CAF_TEST_FIXTURE_SCOPE(progress_tests, fixture)

CAF_TEST(progress in a tight loop writes at most one row version per flush) {
  // Every row version the queue table gets, counted as it is written.
  auto schema = area.where().schema;
  area.sql().exec(
    fmt::format("CREATE TABLE {0}.row_versions (n integer NOT NULL); "
                "CREATE FUNCTION {0}.count_version() RETURNS trigger LANGUAGE plpgsql AS "
                "$$ BEGIN INSERT INTO {0}.row_versions VALUES (1); RETURN NULL; END $$; "
                "CREATE TRIGGER count_versions AFTER UPDATE ON {1} FOR EACH ROW "
                "EXECUTE FUNCTION {0}.count_version()",
                schema, area.queue_table()));
  auto before = updates_in_statistics();
  auto node = spawn_worker_node(*sys, options(), tasks);
  auto t0 = std::chrono::steady_clock::now();
  auto m = producer.enqueue(busy(2500));
  // Visible while it runs: started, with a fraction.
  CAF_CHECK(testkit::wait_until(
    [&] {
      auto s = ops.get_state(m.id);
      return s && s->status == "started" && s->progress_json;
    },
    10s));
  auto calls = producer.get_result<std::int64_t>(m, true, 30s);
  auto seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  stop(node);
  CAF_MESSAGE(calls << " reports in " << seconds << " s");
  CAF_CHECK_GREATER(calls, 10000);
  // Its last report went with the outcome.
  auto done = ops.get_state(m.id);
  CAF_REQUIRE(done.has_value());
  CAF_CHECK_EQUAL(done->status, "success");
  CAF_REQUIRE(done->progress_json.has_value());
  CAF_CHECK_EQUAL(*done->progress_json, fmt::format(R"({{"calls": {}}})", calls));
  // The claim, the start, at most one progress write a second, the outcome: a handful, not one
  // per report. The statistics agree once the node's sessions have reported them.
  auto versions = updates_counted();
  CAF_MESSAGE(versions << " row versions written");
  CAF_CHECK_GREATER_OR_EQUAL(versions, 3);
  CAF_CHECK_LESS_OR_EQUAL(versions, 3 + static_cast<std::int64_t>(seconds) + 1);
  CAF_CHECK(testkit::wait_until([&] { return updates_in_statistics() - before == versions; }, 15s));
}

CAF_TEST(progress that cannot be stored is dropped and the task goes on) {
  auto node = spawn_worker_node(*sys, options(), tasks);
  auto m = producer.enqueue(careless());
  CAF_CHECK_EQUAL(producer.get_result<int>(m, true, 30s), 7);
  stop(node);
  auto s = ops.get_state(m.id);
  CAF_REQUIRE(s.has_value());
  CAF_CHECK_EQUAL(s->status, "success");
  CAF_REQUIRE(s->progress_json.has_value());
  CAF_CHECK_EQUAL(*s->progress_json, "0.25");
}

CAF_TEST(progress while the database connection is lost never fails the task) {
  // Its own application name, so that only this node's sessions go (other tests may run
  // nodes on the same cluster meanwhile).
  auto o = options();
  auto app = "troupe-progress-" + area.where().schema;
  o.dsn += " application_name=" + app;
  auto node = spawn_worker_node(*sys, o, tasks);
  auto m = producer.enqueue(patient());
  CAF_REQUIRE(testkit::wait_until(
    [&] {
      auto s = ops.get_state(m.id);
      return s && s->progress_json;
    },
    10s));
  // The node's storage sessions go (its liveness lock, on the listener's, stays): its writes
  // of progress fail until they reconnect.
  auto killed = area.scalar(fmt::format(
    "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = "
    "'{}' AND pid NOT IN (SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND classid = "
    "{}::oid)",
    app, storage::node_lock_class(area.where())));
  CAF_CHECK_GREATER(killed, 0);
  // The task goes on reporting, and once the node's sessions are back its progress moves again.
  auto seen = ops.get_state(m.id)->progress_json;
  CAF_CHECK(testkit::wait_until(
    [&] {
      auto s = ops.get_state(m.id);
      return s && s->status == "started" && s->progress_json != seen;
    },
    15s));
  release_patient = true;
  CAF_CHECK_EQUAL(producer.get_result<int>(m, true, 60s), 9);
  stop(node);
  auto s = ops.get_state(m.id);
  CAF_REQUIRE(s.has_value());
  CAF_CHECK_EQUAL(s->status, "success");
  CAF_CHECK_EQUAL(s->attempts, 1);
}

CAF_TEST_FIXTURE_SCOPE_END()
