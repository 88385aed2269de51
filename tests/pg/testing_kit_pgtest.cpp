#define CAF_SUITE testing_kit
#include <caf/test/unit_test.hpp>

#include "scratch_area.hpp"
#include "troupe/testing.hpp"

#include <fmt/format.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>

using namespace troupe;
using namespace std::chrono_literals;

namespace {

task_ref<int(int, int)> add{"kit.add"};
task_ref<std::string(std::string)> shout{"kit.shout", "loud"};
task_ref<void()> flaky{"kit.flaky"};
task_ref<void(std::string)> patient{"kit.patient"};
task_ref<void(message_summary, std::string)> after_add{"kit.after_add"};
task_ref<std::string()> context_echo{"kit.context_echo"};

std::atomic<int> flaky_runs{0};
std::atomic<int> callbacks{0};

std::shared_ptr<task_registry> registry() {
  auto tasks = std::make_shared<task_registry>();
  task_options keep;
  keep.store_results = true;
  tasks->define(
    add,
    [](task_context& ctx, int a, int b) {
      ctx.set_progress(0.5);
      ctx.set_progress(R"({"added":true})");
      return a + b;
    },
    keep);
  tasks->define(
    shout, [](const std::string& s) { return s + "!"; }, keep);
  task_options quick_retries;
  quick_retries.max_retries = 2;
  quick_retries.min_backoff = 60s; // waits unless the drain runs scheduled messages
  tasks->define(
    flaky,
    [] {
      ++flaky_runs;
      throw std::runtime_error("flaky fails");
    },
    quick_retries);
  tasks->define(patient, [](task_context& ctx, const std::string&) { ctx.check(); });
  tasks->define(context_echo, [](task_context& ctx) {
    return ctx.message_id + " " + ctx.queue + " " + std::to_string(ctx.attempt);
  });
  tasks->define(after_add, [](const message_summary&, const std::string&) { ++callbacks; });
  return tasks;
}

struct fixture {
  // The run's cluster, as TROUPE_TEST_DSN (the kit reads only that variable), before the area.
  bool dsn_set = setenv("TROUPE_TEST_DSN", testkit::test_dsn().c_str(), 1) == 0;
  testing::test_area area;
  std::shared_ptr<task_registry> tasks = registry();
};

} // namespace

CAF_TEST_FIXTURE_SCOPE(testing_kit_tests, fixture)

CAF_TEST(a test area is a fresh schema dropped at its end) {
  std::string schema;
  {
    testing::test_area other;
    schema = other.where().schema;
    CAF_CHECK(schema != area.where().schema);
    other.client().enqueue(add(1, 2));
    CAF_CHECK_EQUAL(testing::all_enqueued(other).size(), 1u);
    CAF_CHECK_EQUAL(testing::all_enqueued(area).size(), 0u);
  }
  testkit::scratch_area probe;
  CAF_CHECK_EQUAL(
    probe.scalar(fmt::format("SELECT count(*) FROM pg_namespace WHERE nspname = '{}'", schema)), 0);
}

CAF_TEST(a test area without TROUPE_TEST_DSN names the variable) {
  std::string dsn = std::getenv("TROUPE_TEST_DSN");
  unsetenv("TROUPE_TEST_DSN");
  std::string what;
  try {
    testing::test_area none;
  } catch (const error& e) {
    what = e.what();
  }
  setenv("TROUPE_TEST_DSN", dsn.c_str(), 1);
  CAF_CHECK(what.find("TROUPE_TEST_DSN is not set") != std::string::npos);
}

CAF_TEST(run_inline runs the implementation with a fake context) {
  auto run = testing::run_inline(*tasks, add(2, 3));
  CAF_CHECK_EQUAL(run.result<int>(), 5);
  CAF_CHECK_EQUAL(run.progress, (std::vector<std::string>{"0.5", R"({"added":true})"}));
  // The context is the fake one, the message's id unless told otherwise.
  testing::fake_context third;
  third.attempt = 3;
  third.message_id = "the-id";
  auto seen = testing::run_inline(*tasks, context_echo(), third);
  CAF_CHECK_EQUAL(seen.result<std::string>(), "the-id default 3");
  auto own = context_echo();
  CAF_CHECK_EQUAL(testing::run_inline(*tasks, own).result<std::string>(), own.id + " default 1");
  // The context's stop conditions reach the task.
  testing::fake_context cancelled;
  cancelled.cancel_requested = true;
  bool stopped = false;
  try {
    testing::run_inline(*tasks, patient("x"), cancelled);
  } catch (const cancellation_requested&) {
    stopped = true;
  }
  CAF_CHECK(stopped);
  testing::fake_context no_time;
  no_time.time_limit = 0ms;
  stopped = false;
  try {
    testing::run_inline(*tasks, patient("x"), no_time);
  } catch (const time_limit_exceeded&) {
    stopped = true;
  }
  CAF_CHECK(stopped);
  // An unknown task, and arguments that do not fit, are refused as on a node.
  auto refused = [&](const message& m, errc code) {
    try {
      testing::run_inline(*tasks, m);
    } catch (const error& e) {
      return e.code() == code;
    }
    return false;
  };
  CAF_CHECK(refused(make_message("default", "kit.none", "[]"), errc::unknown_task));
  CAF_CHECK(refused(make_message("default", "kit.add", R"(["two", 3])"), errc::decode_failed));
}

CAF_TEST(require_enqueued matches task arguments and options and says what it found) {
  area.client().enqueue(add(1, 2).with_max_retries(3).with_priority(4));
  auto found = testing::require_enqueued(area, add(1, 2));
  CAF_CHECK_EQUAL(found.task, "kit.add");
  CAF_CHECK_EQUAL(found.priority, 4);
  testing::enqueued_filter with_options;
  with_options.task = "kit.add";
  with_options.options_json = R"({"max_retries": 3})";
  CAF_CHECK_EQUAL(testing::require_enqueued(area, with_options).id, found.id);
  testing::require_not_enqueued(area, add(2, 1));
  std::string what;
  try {
    testing::require_enqueued(area, add(9, 9));
  } catch (const testing::expectation_failed& e) {
    what = e.what();
  }
  CAF_CHECK_EQUAL(what, "expected an enqueued message with task kit.add, queue default, "
                        "arguments [9,9], state queued; the queue table holds:\n  kit.add [1, 2] "
                        "options {\"max_retries\": 3} on default (priority 4, queued)");
  what.clear();
  try {
    testing::require_not_enqueued(area, add(1, 2));
  } catch (const testing::expectation_failed& e) {
    what = e.what();
  }
  CAF_CHECK(what.rfind("expected no enqueued message with task kit.add", 0) == 0);
  CAF_CHECK(what.find(found.id) != std::string::npos);
}

CAF_TEST(drain runs the queues with a real node including follow ups) {
  auto first = area.client().enqueue(add(1, 2).with_on_success("kit.after_add"));
  area.client().enqueue(shout("hey"));
  area.client().enqueue(add(5, 5).with_delay(1h));
  callbacks = 0;
  auto report = testing::drain(area, tasks);
  // add, its callback, and shout; the delayed one stays.
  CAF_CHECK_EQUAL(report.attempts, 3);
  CAF_CHECK_EQUAL(report.done, 3);
  CAF_CHECK_EQUAL(report.scheduled, 1);
  CAF_CHECK_EQUAL(callbacks.load(), 1);
  CAF_CHECK_EQUAL(area.client().get_result<int>(first), 3);
  auto state = area.admin().get_state(first.id);
  CAF_REQUIRE(state.has_value());
  CAF_CHECK_EQUAL(state->status, "success");
  // Only the queue asked for.
  area.client().enqueue(shout("again"));
  area.client().enqueue(add(0, 0));
  testing::drain_options loud;
  loud.queues = {"loud"};
  report = testing::drain(area, tasks, loud);
  CAF_CHECK_EQUAL(report.attempts, 1);
  testing::require_enqueued(area, add(0, 0));
  // A queue no task runs on is refused as a node refuses it.
  testing::drain_options nowhere;
  nowhere.queues = {"nowhere"};
  bool refused = false;
  try {
    testing::drain(area, tasks, nowhere);
  } catch (const error& e) {
    refused = e.code() == errc::invalid_argument;
  }
  CAF_CHECK(refused);
}

CAF_TEST(drain with scheduled messages runs delayed ones and every retry) {
  area.client().enqueue(add(5, 5).with_delay(1h));
  auto m = area.client().enqueue(flaky());
  flaky_runs = 0;
  testing::drain_options all;
  all.with_scheduled = true;
  auto report = testing::drain(area, tasks, all);
  CAF_CHECK_EQUAL(flaky_runs.load(), 3); // the first attempt and two retries
  CAF_CHECK_EQUAL(report.failed, 1);
  CAF_CHECK_EQUAL(report.done, 1);
  CAF_CHECK_EQUAL(report.scheduled, 0);
  auto failed = area.admin().show_failed(m.id);
  CAF_CHECK(failed.error_json.find("flaky fails") != std::string::npos);
}

CAF_TEST(drain gives up after its timeout and says which queues) {
  area.admin().pause("default");
  area.client().enqueue(add(1, 1));
  testing::drain_options brief;
  brief.queues = {"default"};
  brief.timeout = 500ms;
  std::string what;
  try {
    testing::drain(area, tasks, brief);
  } catch (const testing::expectation_failed& e) {
    what = e.what();
  }
  CAF_CHECK_EQUAL(what, "drain: the queues default still had messages to run after 500 ms");
}

CAF_TEST(a private cluster starts serves a test area and is removed) {
  std::string folder;
  {
    testing::private_cluster cluster;
    folder = cluster.dsn().substr(5, cluster.dsn().find(' ') - 5); // host=<folder>
    testing::test_area inside{cluster.dsn()};
    inside.client().enqueue(add(1, 1));
    CAF_CHECK_EQUAL(testing::all_enqueued(inside).size(), 1u);
  }
  CAF_CHECK(!folder.empty());
  CAF_CHECK(!std::filesystem::exists(folder));
}

CAF_TEST_FIXTURE_SCOPE_END()
