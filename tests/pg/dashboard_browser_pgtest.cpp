// The dashboard in a real browser (Debian's headless Chromium over its DevTools protocol),
// against a real area and a real node: the counts the page shows are what SQL says, a click on
// retry puts a failed message back in its queue, a click on pause keeps new messages queued,
// schedules disable from the page, and a screenshot of each view is saved as a test artifact
// (test-artifacts/dashboard/ in the build folder). Without Chromium it skips with a message;
// under CI=true a skip is a failure.
#define CAF_SUITE dashboard_browser
#include <caf/test/unit_test.hpp>

#include "browser.hpp"
#include "node_harness.hpp"
#include "prometheus_text.hpp"
#include "served_process.hpp"
#include "troupe/admin.hpp"

#include <fmt/format.h>

#include <atomic>

using namespace troupe;
using namespace std::chrono_literals;

namespace {

task_ref<int(int)> twice{"browser.twice"};
task_ref<void()> flaky{"browser.flaky"};

const std::string token = "browser-test-token-0123456789";

std::atomic<bool> failing{true};

struct fixture : testkit::node_harness {
  admin ops{admin_options{area.dsn(), area.where()}};

  fixture() {
    tasks->define(twice, [](int x) { return 2 * x; });
    task_options no_retries;
    no_retries.max_retries = 0;
    no_retries.also_queues = {"work"}; // sent there with on_queue
    tasks->define(
      flaky,
      [] {
        if (failing.load())
          throw std::runtime_error("flaky failed on purpose");
      },
      no_retries);
  }

  std::string global() const {
    return "--dsn " + testkit::shell_quote(area.dsn()) + " --schema " + area.where().schema;
  }

  std::int64_t rows(const std::string& queue, const std::string& state) {
    return count(fmt::format("queue_name = '{}' AND state = '{}'", queue, state));
  }
};

/// The number the page shows in `field` of queue `queue`'s row (-1 when it shows none).
std::int64_t shown(testkit::browser& b, const std::string& queue, const std::string& field) {
  auto text = b.evaluate(fmt::format(
    "(() => {{ const c = document.querySelector('tr[data-queue=\"{}\"] td[data-field=\"{}\"]'); "
    "return c ? c.textContent : null; }})()",
    queue, field));
  if (text == "null")
    return -1;
  return std::stoll(text.substr(1, text.size() - 2));
}

std::string shot(const std::string& name) {
  return testkit::artifact_dir("dashboard") + "/" + name + ".png";
}

} // namespace

CAF_TEST_FIXTURE_SCOPE(dashboard_browser_tests, fixture)

CAF_TEST(the page shows what SQL says and its buttons retry pause resume and disable) {
  auto chromium = testkit::browser::find_chromium();
  if (chromium.empty()) {
    if (testkit::skips_are_failures())
      CAF_FAIL("Chromium is not installed (Debian's chromium package) and CI=true");
    CAF_MESSAGE("skipping the browser tests: Chromium is not installed (apt-get install "
                "chromium, or set TROUPE_CHROMIUM)");
    return;
  }
  failing = true;
  ops.set_attempt_history(true);
  // default: 5 done; work: 2 failed; later: 2 delayed an hour.
  for (int i = 0; i < 5; ++i)
    producer.enqueue(twice(i));
  auto failed_one = producer.enqueue(flaky().on_queue("work"));
  producer.enqueue(flaky().on_queue("work"));
  producer.enqueue(twice(7).on_queue("later").with_delay(1h));
  producer.enqueue(twice(8).on_queue("later").with_delay(1h));
  auto o = options();
  o.queues.push_back(queue_options{"work"});
  start_node(o);
  CAF_REQUIRE(testkit::wait_until([&] { return count("state IN ('done', 'failed')") == 7; }, 30s));
  schedule_spec nightly;
  nightly.name = "nightly-report";
  nightly.task = twice.name();
  nightly.args_json = "[1]";
  nightly.cron = "30 2 * * *";
  nightly.time_zone = "Europe/Berlin";
  ops.create_schedule(nightly);

  testkit::served_process d(global(), "dashboard", "--sample 1s",
                            "TROUPE_DASHBOARD_TOKEN=" + testkit::shell_quote(token));
  testkit::browser b(chromium);

  // Queues: every count of every queue is what SQL says.
  b.navigate(d.base_url() + "/#/queues");
  CAF_REQUIRE(b.wait_for("document.body.dataset.loaded === 'queues' && "
                         "document.querySelector('tr[data-queue=\"work\"]')"));
  for (const auto* queue : {"default", "work", "later"})
    for (const auto* state : {"queued", "running", "done", "failed", "cancelled"})
      CAF_CHECK_EQUAL(shown(b, queue, state), rows(queue, state));
  CAF_CHECK_EQUAL(shown(b, "default", "done"), 5);
  CAF_CHECK_EQUAL(shown(b, "work", "failed"), 2);
  CAF_CHECK_EQUAL(shown(b, "later", "scheduled"), 2);
  // The chart draws the queue's rate (a dot, then a line) once two samples are in.
  CAF_CHECK(b.wait_for("document.querySelector('.chart [data-queue=\"default\"]')"));
  b.screenshot(shot("queues"));

  // Without the token the buttons are disabled; with it they act.
  CAF_CHECK_EQUAL(b.evaluate("document.querySelector('tr[data-queue=\"work\"] "
                             "button[data-action=\"pause\"]').disabled"),
                  "true");
  b.type("#token", token);
  b.click("#token-save");
  CAF_REQUIRE(b.wait_for("document.querySelector('#actions-state').textContent === 'actions on'"));
  CAF_REQUIRE(b.wait_for("document.body.dataset.loaded === 'queues' && "
                         "!document.querySelector('tr[data-queue=\"work\"] "
                         "button[data-action=\"pause\"]').disabled"));

  // Pause "work" by a click: new messages of it stay queued while "default" goes on.
  b.click("tr[data-queue=\"work\"] button[data-action=\"pause\"]");
  CAF_REQUIRE(testkit::wait_until([&] { return ops.queue_status("work").at(0).paused; }, 15s));
  CAF_CHECK(b.wait_for("document.querySelector('tr[data-queue=\"work\"] td[data-field=\"paused\"]')"
                       ".textContent === 'paused'"));
  failing = false;
  for (int i = 0; i < 3; ++i)
    producer.enqueue(flaky().on_queue("work"));
  auto probe = producer.enqueue(twice(100));
  CAF_REQUIRE(testkit::wait_until(
    [&] { return count(fmt::format("message_id = '{}' AND state = 'done'", probe.id)) == 1; },
    30s));
  CAF_CHECK_EQUAL(rows("work", "queued"), 3);
  CAF_CHECK(b.wait_for("document.querySelector('tr[data-queue=\"work\"] td[data-field=\"queued\"]')"
                       ".textContent === '3'"));

  // Failed: a click on retry puts the message back in its queue (paused: it stays queued).
  b.navigate(d.base_url() + "/#/failed");
  auto row = fmt::format("tr[data-id=\"{}\"]", failed_one.id);
  CAF_REQUIRE(b.wait_for("document.body.dataset.loaded === 'failed' && document.querySelector('" +
                         row + "')"));
  CAF_CHECK_EQUAL(b.evaluate("document.querySelectorAll('#failed-results tbody tr').length"),
                  std::to_string(rows("work", "failed")));
  b.screenshot(shot("failed"));
  b.click(row + " button[data-action=\"retry\"]");
  CAF_CHECK(b.wait_for("document.querySelector('" + row +
                       " td[data-field=\"state\"]').textContent === 'queued'"));
  CAF_CHECK_EQUAL(count(fmt::format("message_id = '{}' AND state = 'queued'", failed_one.id)), 1);
  CAF_CHECK_EQUAL(rows("work", "failed"), 1);

  // Resume by a click: the 3 new messages and the retried one run.
  b.navigate(d.base_url() + "/#/queues");
  CAF_REQUIRE(b.wait_for("document.body.dataset.loaded === 'queues'"));
  b.click("tr[data-queue=\"work\"] button[data-action=\"resume\"]");
  CAF_CHECK(testkit::wait_until([&] { return rows("work", "done") == 4; }, 30s));
  CAF_CHECK(b.wait_for("document.querySelector('tr[data-queue=\"work\"] td[data-field=\"done\"]')"
                       ".textContent === '4'"));

  // Messages: the filter's count is SQL's; a message's detail, its arguments on request.
  b.navigate(d.base_url() + "/#/messages?queue=default");
  CAF_REQUIRE(b.wait_for("document.body.dataset.loaded === 'messages' && "
                         "document.querySelector('#message-results tbody tr')"));
  CAF_CHECK_EQUAL(b.evaluate("document.querySelector('[data-field=\"count\"]').textContent"),
                  fmt::format("\"{} match\"", count("queue_name = 'default'")));
  b.screenshot(shot("messages"));
  b.navigate(d.base_url() + "/#/message/" + failed_one.id);
  CAF_REQUIRE(b.wait_for("document.body.dataset.loaded === 'message'"));
  CAF_CHECK_EQUAL(b.evaluate("document.querySelector('dd[data-field=\"state\"]').textContent"),
                  "\"done\"");
  CAF_CHECK_EQUAL(b.evaluate("!!document.querySelector('dd[data-field=\"arguments\"]')"), "false");
  b.click("button[data-action=\"show-arguments\"]");
  CAF_CHECK(b.wait_for("document.querySelector('dd[data-field=\"arguments\"]')"));
  // Two attempts: the failure and the run after the retry.
  CAF_CHECK(b.wait_for("document.querySelectorAll('td[data-field=\"outcome\"]').length === 2"));
  b.screenshot(shot("message"));

  // Schedules: its next runs, and a click disables it.
  b.navigate(d.base_url() + "/#/schedules");
  CAF_REQUIRE(b.wait_for("document.body.dataset.loaded === 'schedules' && "
                         "document.querySelector('tr[data-name=\"nightly-report\"]')"));
  CAF_CHECK_EQUAL(b.evaluate("document.querySelectorAll('tr[data-name=\"nightly-report\"] "
                             "td[data-field=\"next_runs\"] div').length"),
                  "3");
  b.screenshot(shot("schedules"));
  b.click("tr[data-name=\"nightly-report\"] button[data-action=\"disable\"]");
  CAF_CHECK(testkit::wait_until([&] { return !ops.schedule("nightly-report")->enabled; }, 15s));
  CAF_CHECK(b.wait_for("document.querySelector('tr[data-name=\"nightly-report\"] "
                       "td[data-field=\"enabled\"]').textContent === 'disabled'"));

  // Nodes: the node, live, with its queues.
  b.navigate(d.base_url() + "/#/nodes");
  CAF_REQUIRE(b.wait_for("document.body.dataset.loaded === 'nodes' && "
                         "document.querySelector('td[data-field=\"alive\"]')"));
  CAF_CHECK_EQUAL(b.evaluate("document.querySelector('td[data-field=\"alive\"]').textContent"),
                  "\"live\"");
  CAF_CHECK_EQUAL(b.evaluate("document.querySelector('td[data-field=\"queues\"]').textContent"),
                  "\"default, work\"");
  b.screenshot(shot("nodes"));
  CAF_CHECK_EQUAL(d.stop(), 0);
}

CAF_TEST_FIXTURE_SCOPE_END()
