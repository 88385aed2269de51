// Publishing without a node: one message per call, batches of 1,000, and transactional
// publishing on the benchmark's own connection next to a business write.
#include "scenarios.hpp"

#include <troupe/client.hpp>
#include <troupe/transactional.hpp>

#include <fmt/format.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <thread>

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

/// Runs `call(i)` for each i below `n`, timing each call, with a progress display; fills the
/// figures of `r` from those times.
template <class Call>
void time_calls(scenario_result& r, std::int64_t n, Call&& call) {
  std::vector<double> latencies;
  latencies.reserve(static_cast<std::size_t>(n));
  progress bar(r.scenario, n);
  auto start = clock_type::now();
  for (std::int64_t i = 0; i < n; ++i) {
    auto t0 = clock_type::now();
    call(i);
    latencies.push_back(ms_between(t0, clock_type::now()));
    bar.update(i + 1);
  }
  bar.finish();
  fill(r, n, start, latencies);
}

} // namespace

scenario_result run_enqueue_single(bench_context& ctx) {
  scenario_result r{"enqueue-single"};
  auto where = ctx.fresh_area(r.scenario);
  auto n = ctx.tasks_or(5'000, 1'000);
  client producer({ctx.options().dsn, where, "troupe-bench-producer"});
  producer.enqueue(noop(-1)); // opens the connection and prepares the statement
  time_calls(r, n, [&](std::int64_t i) { producer.enqueue(noop(i)); });
  r.set("method", "client::enqueue, one message per call and per transaction");
  r.set("latency", "per call");
  return r;
}

scenario_result run_enqueue_batch(bench_context& ctx) {
  // Like the raw-SQL limit (best client count, a checkpoint before each run), publishing is
  // measured with 1, 2 and 4 producers (threads with a client each, batches of 1,000 from one
  // shared list) and the best is reported; every count's figure is in the settings.
  scenario_result r{"enqueue-batch"};
  auto n = ctx.tasks_or(200'000, 50'000);
  constexpr std::int64_t batch_size = 1000;
  std::vector<int> counts{1, 2, 4};
  double best = 0;
  int best_producers = 0;
  auto conn = ctx.connect("troupe-bench");
  std::vector<std::pair<std::string, std::string>> best_costs;
  for (int producers : counts) {
    auto where = ctx.fresh_area(r.scenario);
    std::vector<std::unique_ptr<client>> clients;
    for (int p = 0; p < producers; ++p) {
      clients.push_back(std::make_unique<client>(
        client_options{ctx.options().dsn, where, "troupe-bench-producer"}));
      clients.back()->enqueue(noop(-1)); // opens the connection and prepares the statement
    }
    auto batches = noop_batches(n, batch_size);
    // Each count starts after a checkpoint, as each of the limit's runs does (bench/compare):
    // no count pays for the WAL of the one before it.
    conn.exec("CHECKPOINT");
    auto costs_start = sample_db_costs(conn, where);
    std::vector<std::vector<double>> latencies(static_cast<std::size_t>(producers));
    std::atomic<std::size_t> next{0};
    std::atomic<std::int64_t> sent{0};
    progress bar(fmt::format("enqueue-batch x{}", producers), n);
    auto start = clock_type::now();
    std::mutex bar_mutex; // the progress display is not thread-safe
    std::vector<std::thread> threads;
    for (int p = 0; p < producers; ++p)
      threads.emplace_back([&, p] {
        for (auto k = next++; k < batches.size(); k = next++) {
          auto t0 = clock_type::now();
          auto size = static_cast<std::int64_t>(batches[k].size());
          clients[static_cast<std::size_t>(p)]->enqueue_many(std::move(batches[k]));
          latencies[static_cast<std::size_t>(p)].push_back(ms_between(t0, clock_type::now()));
          auto total = sent += size;
          std::lock_guard lock{bar_mutex};
          bar.update(total);
        }
      });
    for (auto& t : threads)
      t.join();
    std::vector<double> all;
    for (auto& l : latencies)
      all.insert(all.end(), l.begin(), l.end());
    scenario_result one{r.scenario};
    fill(one, n, start, all); // timed to here: the cost reading below is not publishing
    bar.finish();
    clients.clear();
    wait_sessions_ended(conn); // their counters are in once their sessions ended
    // Read now: the next count's checkpoint lets the server recycle this count's WAL.
    scenario_result costs{r.scenario};
    db_costs_into(costs, conn, costs_start, sample_db_costs(conn, where), n);
    r.set(fmt::format("per_second_{}_producers", producers), *one.per_second);
    if (*one.per_second > best) {
      best = *one.per_second;
      auto settings = std::move(r.settings);
      r = std::move(one);
      r.settings = std::move(settings);
      best_producers = producers;
      best_costs = std::move(costs.settings);
    }
  }
  r.settings.insert(r.settings.end(), best_costs.begin(), best_costs.end());
  r.set("producers", best_producers);
  r.set("batch_size", batch_size);
  r.set("method", "client::enqueue_many, one transaction per batch (a binary COPY); best of "
                  "1, 2 and 4 producer threads, one client (connection) each");
  r.set("latency", "per batch");
  return r;
}

scenario_result run_enqueue_tx(bench_context& ctx) {
  scenario_result r{"enqueue-tx"};
  auto where = ctx.fresh_area(r.scenario);
  auto n = ctx.tasks_or(5'000, 1'000);
  auto conn = ctx.connect("troupe-bench-app");
  auto orders = storage::quote_identifier(where.schema) + ".orders";
  conn.exec("CREATE TABLE " + orders +
            " (id bigserial PRIMARY KEY, customer text NOT NULL, amount numeric(12, 2) NOT NULL,"
            " created_at timestamptz NOT NULL DEFAULT now())");
  auto insert_order = "INSERT INTO " + orders + " (customer, amount) VALUES ($1, $2)";
  time_calls(r, n, [&](std::int64_t i) {
    conn.exec("BEGIN");
    conn.exec_params(
      insert_order,
      {fmt::format("customer {}", i % 1000), fmt::format("{}.{:02}", i % 500, i % 100)},
      "insert_order");
    enqueue_in_transaction(conn.native(), where, noop(i));
    conn.exec("COMMIT");
  });
  r.set("method", "BEGIN; INSERT an order; enqueue_in_transaction; COMMIT (own libpq connection)");
  r.set("latency", "per transaction");
  return r;
}

} // namespace troupe::bench
