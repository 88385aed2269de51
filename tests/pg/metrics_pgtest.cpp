// A worker node's Prometheus endpoint ([metrics]): what it serves passes `promtool check
// metrics`, and after a known workload its numbers are what SQL says of the queue table. Off by
// default; an address it cannot bind stops the node's spawn with an error naming it.
#define CAF_SUITE metrics
#include <caf/test/unit_test.hpp>

#include "http/http_server.hpp"
#include "node_harness.hpp"
#include "prometheus_text.hpp"

#include <fmt/format.h>

#include <stdexcept>

using namespace troupe;
using namespace std::chrono_literals;

namespace {

task_ref<int(int)> square{"metrics.square"};
task_ref<void()> boom{"metrics.boom"};
task_ref<void()> nobody{"metrics.nobody"}; // never registered on the node

struct fixture : testkit::node_harness {
  fixture() {
    tasks->define(square, [](int x) { return x * x; });
    task_options once;
    once.max_retries = 1;
    once.min_backoff = 1ms;
    once.max_backoff = 10ms;
    tasks->define(
      boom, [] { throw std::runtime_error("boom"); }, once);
  }

  node_options with_metrics() {
    auto o = options();
    o.name = "metrics-node";
    o.metrics.enabled = true;
    o.metrics.port = 0;
    return o;
  }

  std::int32_t port_of_node() {
    caf::scoped_actor self{sys};
    std::int32_t port = 0;
    self->request(*node, 30s, ready_atom_v)
      .receive([&](const node_report& r) { port = r.metrics_port; },
               [&](caf::error& e) { CAF_FAIL("the node did not start: " << describe(e)); });
    return port;
  }

  std::string scrape(std::int32_t port) {
    auto r = http::fetch("127.0.0.1", port, "GET", "/metrics");
    CAF_REQUIRE_EQUAL(r.status, 200);
    return r.body;
  }

  double value(const std::string& text, const std::string& series) {
    auto v = testkit::sample(text, series);
    if (!v)
      CAF_FAIL("no sample " << series);
    return *v;
  }
};

std::string processed(const std::string& task, const std::string& outcome) {
  return fmt::format(
    "troupe_messages_processed_total{{queue=\"default\",task=\"{}\",outcome=\"{}\"}}", task,
    outcome);
}

} // namespace

CAF_TEST_FIXTURE_SCOPE(metrics_tests, fixture)

CAF_TEST(a node serves its metrics and they match the queue table after a known workload) {
  constexpr int squares = 40;
  std::vector<message> batch;
  for (int i = 0; i < squares; ++i)
    batch.push_back(square(i));
  auto sent = producer.enqueue_many(batch);
  auto failing = producer.enqueue(boom());
  auto orphan = producer.enqueue(nobody());
  start_node(with_metrics());
  auto port = port_of_node();
  CAF_REQUIRE_NOT_EQUAL(port, 0);
  CAF_REQUIRE(
    testkit::wait_until([&] { return count("state IN ('done', 'failed')") == squares + 2; }, 30s));
  // 40 squares and one unregistered task ran once, the failing task twice: 43 attempts, whose
  // outcomes are counted once the batcher's writes are answered.
  constexpr double attempts = squares + 3;
  std::string text;
  CAF_REQUIRE(testkit::wait_until(
    [&] {
      text = scrape(port);
      auto flushed = testkit::sample(text, "troupe_completion_batch_size_sum");
      auto running = testkit::sample(text, "troupe_running{queue=\"default\"}");
      return flushed && *flushed == attempts && running && *running == 0;
    },
    10s));
  CHECK_PROMTOOL(text);
  CAF_CHECK_EQUAL(value(text, "troupe_node_up{node=\"metrics-node\"}"), 1);
  // What SQL says, outcome by outcome.
  auto done_squares = count("task_name = 'metrics.square' AND state = 'done'");
  CAF_CHECK_EQUAL(done_squares, squares);
  CAF_CHECK_EQUAL(value(text, processed("metrics.square", "done")), done_squares);
  CAF_CHECK_EQUAL(value(text, processed("metrics.square", "failed")), 0);
  CAF_CHECK_EQUAL(value(text, processed("metrics.boom", "failed")),
                  count("task_name = 'metrics.boom' AND state = 'failed'"));
  CAF_CHECK_EQUAL(value(text, processed("metrics.boom", "retry")), 1);
  CAF_CHECK_EQUAL(value(text, "troupe_retries_total{queue=\"default\",task=\"metrics.boom\"}"), 1);
  CAF_CHECK_EQUAL(value(text, processed("(unregistered)", "failed")),
                  count("task_name = 'metrics.nobody' AND state = 'failed'"));
  CAF_CHECK_EQUAL(
    value(text, "troupe_task_duration_seconds_count{queue=\"default\",task=\"metrics.square\"}"),
    squares);
  CAF_CHECK_EQUAL(
    value(
      text,
      "troupe_task_duration_seconds_bucket{queue=\"default\",task=\"metrics.square\",le=\"+Inf\"}"),
    squares);
  CAF_CHECK_EQUAL(
    value(text, "troupe_task_wait_seconds_count{queue=\"default\",task=\"metrics.boom\"}"), 2);
  // Every attempt was claimed once, and its outcome written once.
  CAF_CHECK_EQUAL(value(text, "troupe_claim_batch_size_sum{queue=\"default\"}"), attempts);
  CAF_CHECK_EQUAL(value(text, "troupe_prefetched{queue=\"default\"}"), 0);
  CAF_CHECK_EQUAL(value(text, "troupe_storage_errors_total{kind=\"connection_lost\"}"), 0);
  // No message id is ever part of a label.
  for (const auto& m : sent)
    CAF_CHECK_EQUAL(text.find(m.id), std::string::npos);
  CAF_CHECK_EQUAL(text.find(failing.id), std::string::npos);
  CAF_CHECK_EQUAL(text.find(orphan.id), std::string::npos);
  // Once the node stopped, nothing serves its metrics any more.
  auto report = stop();
  CAF_CHECK_EQUAL(report.metrics_port, port);
  bool refused = false;
  try {
    http::fetch("127.0.0.1", port, "GET", "/metrics", {}, {}, 2000);
  } catch (const error& e) {
    refused = e.code() == errc::connection_lost;
  }
  CAF_CHECK(refused);
}

CAF_TEST(metrics are off by default and a port in use is refused naming the address) {
  start_node(options());
  CAF_CHECK_EQUAL(port_of_node(), 0);
  stop();
  // Another endpoint holds a port: a node asked to listen there does not start.
  http::server holder;
  auto taken = holder.start({"127.0.0.1", 0});
  auto o = with_metrics();
  o.metrics.port = taken;
  try {
    start_node(o);
    CAF_FAIL("a node started on a port in use");
  } catch (const error& e) {
    CAF_CHECK_EQUAL(e.code(), errc::invalid_argument);
    CAF_CHECK_NOT_EQUAL(std::string(e.what()).find(fmt::format("127.0.0.1:{}", taken)),
                        std::string::npos);
  }
  node.reset();
}

CAF_TEST_FIXTURE_SCOPE_END()
