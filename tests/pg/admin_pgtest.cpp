#define CAF_SUITE admin
#include <caf/test/unit_test.hpp>

#include "scratch_area.hpp"
#include "troupe/admin.hpp"
#include "troupe/client.hpp"
#include "troupe/error.hpp"
#include "troupe/task.hpp"
#include "troupe/worker_node.hpp"

#include <fmt/format.h>

#include <thread>

using namespace troupe;
using namespace std::chrono_literals;

namespace {

task_ref<void(int)> job{"job", "jobs"};

struct fixture {
  testkit::scratch_area area; // migrated: an area of its own for the tests that need one
  std::string dsn = testkit::test_dsn();
  // A schema no test has initialized yet (dropped at the end).
  troupe::area fresh{area.where().schema + "_fresh", ""};

  ~fixture() {
    try {
      area.sql().exec("DROP SCHEMA IF EXISTS " + storage::quote_identifier(fresh.schema) +
                      " CASCADE");
    } catch (...) {
    }
  }

  admin on(const troupe::area& a) { return admin(admin_options{dsn, a}); }

  errc failure_of(const std::function<void()>& f) {
    try {
      f();
    } catch (const error& e) {
      return e.code();
    }
    CAF_FAIL("expected a troupe::error");
    return errc::bug;
  }
};

} // namespace

CAF_TEST_FIXTURE_SCOPE(admin_tests, fixture)

CAF_TEST(init creates an area and then finds nothing to do) {
  auto a = on(fresh);
  CAF_CHECK_EQUAL(a.version(), 0);
  CAF_CHECK(failure_of([&] { a.stats(); }) == errc::not_found);
  CAF_CHECK(failure_of([&] { a.upgrade(); }) == errc::not_found);
  auto first = a.init();
  CAF_CHECK_EQUAL(first.from_version, 0);
  CAF_CHECK_EQUAL(first.to_version, admin::latest_version());
  CAF_CHECK_EQUAL(first.applied.size(), static_cast<std::size_t>(admin::latest_version()));
  auto again = a.init();
  CAF_CHECK(again.applied.empty());
  CAF_CHECK_EQUAL(again.from_version, admin::latest_version());
  CAF_CHECK(a.upgrade().applied.empty());
  CAF_CHECK(a.stats().empty());
}

CAF_TEST(the migration SQL builds the same area) {
  auto sql = admin::migration_sql(fresh);
  area.sql().exec(sql);
  CAF_CHECK_EQUAL(on(fresh).version(), admin::latest_version());
  CAF_CHECK(failure_of([&] { admin::migration_sql(fresh, admin::latest_version() + 1); }) ==
            errc::invalid_argument);
}

CAF_TEST(stats count the messages of each queue) {
  client producer{client_options{dsn, area.where()}};
  producer.enqueue_many({job(1), job(2), job(3).with_delay(1h)});
  auto a = on(area.where());
  auto all = a.stats();
  CAF_REQUIRE_EQUAL(all.size(), 1u);
  CAF_CHECK_EQUAL(all[0].queue, "jobs");
  CAF_CHECK_EQUAL(all[0].queued, 3);
  CAF_CHECK_EQUAL(all[0].ready, 2);
  CAF_CHECK_EQUAL(all[0].scheduled, 1);
  auto none = a.stats(std::string("other"));
  CAF_REQUIRE_EQUAL(none.size(), 1u);
  CAF_CHECK_EQUAL(none[0].queued, 0);
  CAF_CHECK(failure_of([&] { a.stats(std::string("Bad Queue")); }) == errc::invalid_argument);
}

CAF_TEST(bad input is refused before any connection) {
  CAF_CHECK(failure_of([&] {
              admin(admin_options{"host=db port", area.where()});
            }) == errc::invalid_argument);
  CAF_CHECK(failure_of([&] {
              admin(admin_options{dsn, troupe::area{"Bad", ""}});
            }) == errc::invalid_argument);
}

CAF_TEST(a node is seen registered and alive once it claims and gone once stopped) {
  node_options o;
  o.dsn = dsn;
  o.area = area.where();
  o.name = "admin-test-node";
  o.queues.push_back(queue_options{"jobs"});
  task_registry tasks;
  tasks.define(job, [](int) {});
  worker_node node(o, std::move(tasks));
  auto a = on(area.where());
  CAF_CHECK(!a.wait_for_nodes("jobs", 1, 0ms));
  std::thread runner([&] { node.run(); });
  auto ready = node.ready();
  CAF_REQUIRE(ready.wait_for(10s) == std::future_status::ready);
  auto info = ready.get();
  CAF_CHECK(info.node_id > 0);
  CAF_CHECK_EQUAL(info.name, "admin-test-node");
  CAF_CHECK(a.wait_for_nodes("jobs", 1, 5s));
  CAF_CHECK(!a.wait_for_nodes("other", 1, 0ms));
  auto nodes = a.nodes();
  CAF_REQUIRE_EQUAL(nodes.size(), 1u);
  CAF_CHECK_EQUAL(nodes[0].node_id, info.node_id);
  CAF_CHECK_EQUAL(nodes[0].name, "admin-test-node");
  CAF_CHECK(nodes[0].alive);
  CAF_CHECK_EQUAL(nodes[0].queues, (std::vector<std::string>{"jobs"}));
  node.request_stop();
  runner.join();
  CAF_CHECK(a.nodes().empty()); // deregistered on the way out
}

CAF_TEST_FIXTURE_SCOPE_END()
