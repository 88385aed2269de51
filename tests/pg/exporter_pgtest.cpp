// `troupe exporter` as a user runs it (its own process): after a known workload its /metrics
// say what SQL says of the area, pass `promtool check metrics`, select queues with --queue, and
// a scrape that cannot read the area answers 503 with the reason, never zeros.
#define CAF_SUITE exporter
#include <caf/test/unit_test.hpp>

#include "cli_runner.hpp"
#include "http/http_server.hpp"
#include "node_harness.hpp"
#include "prometheus_text.hpp"
#include "served_process.hpp"
#include "troupe/admin.hpp"

#include <fmt/format.h>

#include <csignal>
#include <fstream>
#include <sstream>
#include <stdexcept>

using namespace troupe;
using namespace std::chrono_literals;

namespace {

task_ref<int(int)> twice{"exporter.twice"};
task_ref<void()> broken{"exporter.broken"};

/// A `troupe exporter` process.
struct exporter_process : testkit::served_process {
  exporter_process(const std::string& global, const std::string& args)
      : served_process(global, "exporter", args) {}

  http::response scrape() const { return get("/metrics"); }
};

struct fixture : testkit::node_harness {
  fixture() {
    tasks->define(twice, [](int x) { return 2 * x; });
    task_options no_retries;
    no_retries.max_retries = 0;
    tasks->define(
      broken, [] { throw std::runtime_error("broken"); }, no_retries);
  }

  std::string global() const {
    return "--dsn " + testkit::shell_quote(area.dsn()) + " --schema " + area.where().schema;
  }

  std::int64_t rows(const std::string& queue, const std::string& where) {
    return count(fmt::format("queue_name = '{}' AND {}", queue, where));
  }
};

double value(const std::string& text, const std::string& series) {
  auto v = testkit::sample(text, series);
  if (!v)
    CAF_FAIL("no sample " << series << " in\n" << text);
  return *v;
}

} // namespace

CAF_TEST_FIXTURE_SCOPE(exporter_tests, fixture)

CAF_TEST(after a known workload the exporter says what SQL says of every queue) {
  // default: 5 done and 2 failed by a node; later: 3 delayed an hour; idle: 4 ready, paused.
  for (int i = 0; i < 5; ++i)
    producer.enqueue(twice(i));
  producer.enqueue(broken());
  producer.enqueue(broken());
  for (int i = 0; i < 3; ++i)
    producer.enqueue(twice(i).on_queue("later").with_delay(1h));
  for (int i = 0; i < 4; ++i)
    producer.enqueue(twice(i).on_queue("idle"));
  admin ops{admin_options{area.dsn(), area.where()}};
  ops.pause("idle");
  start_node();
  CAF_REQUIRE(testkit::wait_until([&] { return count("state IN ('done', 'failed')") == 7; }, 30s));
  stop();
  exporter_process exporter(global(), "");
  auto r = exporter.scrape();
  CAF_REQUIRE_EQUAL(r.status, 200);
  CHECK_PROMTOOL(r.body);
  for (const auto* queue : {"default", "later", "idle"})
    for (const auto* state : {"queued", "running", "done", "failed", "cancelled"})
      CAF_CHECK_EQUAL(
        value(r.body,
              fmt::format("troupe_queue_messages{{queue=\"{}\",state=\"{}\"}}", queue, state)),
        rows(queue, fmt::format("state = '{}'", state)));
  CAF_CHECK_EQUAL(value(r.body, "troupe_queue_messages{queue=\"default\",state=\"done\"}"), 5);
  CAF_CHECK_EQUAL(value(r.body, "troupe_queue_ready{queue=\"idle\"}"),
                  rows("idle", "state = 'queued' AND eta <= now()"));
  CAF_CHECK_EQUAL(value(r.body, "troupe_queue_ready{queue=\"later\"}"), 0);
  CAF_CHECK_EQUAL(value(r.body, "troupe_queue_scheduled{queue=\"later\"}"),
                  rows("later", "state = 'queued' AND eta > now()"));
  CAF_CHECK_EQUAL(value(r.body, "troupe_queue_scheduled{queue=\"later\"}"), 3);
  CAF_CHECK_EQUAL(value(r.body, "troupe_queue_paused{queue=\"idle\"}"), 1);
  CAF_CHECK_EQUAL(value(r.body, "troupe_queue_paused{queue=\"default\"}"), 0);
  CAF_CHECK_EQUAL(value(r.body, "troupe_queue_failed_last_hour{queue=\"default\"}"),
                  rows("default", "state = 'failed' AND finished_at > now() - interval '1 hour'"));
  CAF_CHECK_EQUAL(value(r.body, "troupe_queue_failed_last_hour{queue=\"default\"}"), 2);
  auto oldest = value(r.body, "troupe_queue_oldest_ready_age_seconds{queue=\"idle\"}");
  CAF_CHECK_GREATER(oldest, 0);
  CAF_CHECK_LESS(oldest, 120);
  CAF_CHECK_EQUAL(value(r.body, "troupe_queue_oldest_ready_age_seconds{queue=\"later\"}"), 0);
  // A failure older than the hour leaves the count of the last hour.
  area.sql().exec(
    fmt::format("UPDATE {} SET finished_at = now() - interval '2 hours' WHERE state = 'failed'",
                area.queue_table()));
  auto later = exporter.scrape();
  CAF_CHECK_EQUAL(value(later.body, "troupe_queue_failed_last_hour{queue=\"default\"}"), 0);
  CAF_CHECK_EQUAL(exporter.stop(), 0);
  CAF_CHECK_NOT_EQUAL(exporter.output().find("{\"stopped\":true,\"scrapes\":2}"),
                      std::string::npos);
}

CAF_TEST(queue selects queues and an empty selected queue reads zero) {
  producer.enqueue(twice(1));
  producer.enqueue(twice(2).on_queue("later"));
  exporter_process exporter(global(), "--queue default --queue nothing_here");
  auto r = exporter.scrape();
  CAF_REQUIRE_EQUAL(r.status, 200);
  CHECK_PROMTOOL(r.body);
  CAF_CHECK_EQUAL(value(r.body, "troupe_queue_messages{queue=\"default\",state=\"queued\"}"), 1);
  CAF_CHECK_EQUAL(value(r.body, "troupe_queue_messages{queue=\"nothing_here\",state=\"queued\"}"),
                  0);
  CAF_CHECK_EQUAL(value(r.body, "troupe_queue_ready{queue=\"nothing_here\"}"), 0);
  CAF_CHECK_EQUAL(r.body.find("queue=\"later\""), std::string::npos);
}

CAF_TEST(a scrape that cannot read the area answers 503 with the reason and no numbers) {
  // An area that was never initialized.
  {
    exporter_process exporter(
      "--dsn " + testkit::shell_quote(area.dsn()) + " --schema never_made_here", "");
    auto r = exporter.scrape();
    CAF_CHECK_EQUAL(r.status, 503);
    CAF_CHECK_NOT_EQUAL(r.body.find("not initialized"), std::string::npos);
    CAF_CHECK_EQUAL(r.body.find("troupe_queue_messages"), std::string::npos);
  }
  // A database that does not answer: nothing listens on the port.
  exporter_process exporter("--dsn 'host=127.0.0.1 port=1 dbname=nowhere connect_timeout=2'", "");
  auto r = exporter.scrape();
  CAF_CHECK_EQUAL(r.status, 503);
  CAF_CHECK_NOT_EQUAL(r.body.find("the scrape failed"), std::string::npos);
  CAF_CHECK_EQUAL(r.body.find("troupe_queue_"), std::string::npos);
}

CAF_TEST(bad listen addresses are refused naming the option) {
  for (const auto* bad : {"nowhere", "127.0.0.1:99999", "127.0.0.1:x", "::1:80"}) {
    auto r = testkit::troupe_cli(global() + " exporter --listen " + testkit::shell_quote(bad));
    CAF_CHECK_EQUAL(r.status, 2);
    CAF_CHECK_NOT_EQUAL(r.out.find("option --listen"), std::string::npos);
  }
  auto bad_queue = testkit::troupe_cli(global() + " exporter --queue Bad");
  CAF_CHECK_EQUAL(bad_queue.status, 2);
  // A port another process holds.
  http::server holder;
  auto taken = holder.start({"127.0.0.1", 0});
  auto busy = testkit::troupe_cli(global() + fmt::format(" exporter --listen 127.0.0.1:{}", taken));
  CAF_CHECK_EQUAL(busy.status, 1);
  CAF_CHECK_NOT_EQUAL(busy.out.find(fmt::format("cannot listen on 127.0.0.1:{}", taken)),
                      std::string::npos);
}

CAF_TEST_FIXTURE_SCOPE_END()
