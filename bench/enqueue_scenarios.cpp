// Publishing without a node: one message per call, batches of 1,000, and transactional
// publishing on the benchmark's own connection next to a business write.
#include "scenarios.hpp"

#include <troupe/client.hpp>
#include <troupe/transactional.hpp>

#include <fmt/format.h>

namespace troupe::bench {

namespace {

using clock_type = std::chrono::steady_clock;

/// Fills the figures every enqueue scenario shares from per-call latencies.
void fill(scenario_result& r, std::int64_t tasks, clock_type::time_point start,
          std::vector<double>& latencies_ms) {
  r.tasks = tasks;
  r.seconds = ms_between(start, clock_type::now()) / 1000.0;
  r.per_second = static_cast<double>(tasks) / *r.seconds;
  r.p50_ms = percentile(latencies_ms, 50);
  r.p99_ms = percentile(latencies_ms, 99);
  if (auto rss = read_rss())
    r.peak_rss_mb = rss->peak_mb;
}

} // namespace

scenario_result run_enqueue_single(bench_context& ctx) {
  scenario_result r{"enqueue-single"};
  auto where = ctx.fresh_area(r.scenario);
  auto n = ctx.tasks_or(5'000, 1'000);
  client producer({ctx.options().dsn, where, "troupe-bench-producer"});
  producer.enqueue(noop(-1)); // opens the connection and prepares the statement
  std::vector<double> latencies;
  latencies.reserve(static_cast<std::size_t>(n));
  progress bar("enqueue-single", n);
  auto start = clock_type::now();
  for (std::int64_t i = 0; i < n; ++i) {
    auto t0 = clock_type::now();
    producer.enqueue(noop(i));
    latencies.push_back(ms_between(t0, clock_type::now()));
    bar.update(i + 1);
  }
  bar.finish();
  fill(r, n, start, latencies);
  r.set("method", "client::enqueue, one message per call and per transaction");
  r.set("latency", "per call");
  return r;
}

scenario_result run_enqueue_batch(bench_context& ctx) {
  scenario_result r{"enqueue-batch"};
  auto where = ctx.fresh_area(r.scenario);
  auto n = ctx.tasks_or(200'000, 50'000);
  constexpr std::int64_t batch_size = 1000;
  client producer({ctx.options().dsn, where, "troupe-bench-producer"});
  producer.enqueue(noop(-1));
  // Build the messages first: the figure is the publishing, not the argument encoding.
  std::vector<std::vector<message>> batches;
  for (std::int64_t i = 0; i < n; i += batch_size) {
    std::vector<message> b;
    for (std::int64_t j = i; j < std::min(n, i + batch_size); ++j)
      b.push_back(noop(j));
    batches.push_back(std::move(b));
  }
  std::vector<double> latencies;
  progress bar("enqueue-batch", n);
  std::int64_t sent = 0;
  auto start = clock_type::now();
  for (auto& b : batches) {
    auto t0 = clock_type::now();
    sent += static_cast<std::int64_t>(b.size());
    producer.enqueue_many(std::move(b));
    latencies.push_back(ms_between(t0, clock_type::now()));
    bar.update(sent);
  }
  bar.finish();
  fill(r, n, start, latencies);
  r.set("batch_size", batch_size);
  r.set("method", "client::enqueue_many, one statement and one transaction per batch");
  r.set("latency", "per batch");
  return r;
}

scenario_result run_enqueue_tx(bench_context& ctx) {
  scenario_result r{"enqueue-tx"};
  auto where = ctx.fresh_area(r.scenario);
  auto n = ctx.tasks_or(5'000, 1'000);
  auto conn = ctx.connect("troupe-bench-app");
  auto orders = quote_identifier(where.schema) + ".orders";
  conn.exec("CREATE TABLE " + orders +
            " (id bigserial PRIMARY KEY, customer text NOT NULL, amount numeric(12, 2) NOT NULL,"
            " created_at timestamptz NOT NULL DEFAULT now())");
  auto insert_order = "INSERT INTO " + orders + " (customer, amount) VALUES ($1, $2)";
  std::vector<double> latencies;
  latencies.reserve(static_cast<std::size_t>(n));
  progress bar("enqueue-tx", n);
  auto start = clock_type::now();
  for (std::int64_t i = 0; i < n; ++i) {
    auto t0 = clock_type::now();
    conn.exec("BEGIN");
    conn.exec_params(
      insert_order,
      {fmt::format("customer {}", i % 1000), fmt::format("{}.{:02}", i % 500, i % 100)},
      "insert_order");
    enqueue_in_transaction(conn.native(), where, noop(i));
    conn.exec("COMMIT");
    latencies.push_back(ms_between(t0, clock_type::now()));
    bar.update(i + 1);
  }
  bar.finish();
  fill(r, n, start, latencies);
  r.set("method", "BEGIN; INSERT an order; enqueue_in_transaction; COMMIT (own libpq connection)");
  r.set("latency", "per transaction");
  return r;
}

} // namespace troupe::bench
