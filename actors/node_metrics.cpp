#include "actors/node_metrics.hpp"

#include "http/exposition.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>

namespace troupe::actors {

namespace {

// Seconds: from a millisecond to the default time limit (10 minutes) and past it.
const std::vector<double> seconds_bounds{0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
                                         1,     2.5,   5,    10,    30,   60,  300,  600};
const std::vector<double> claim_bounds{1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024};
const std::vector<double> flush_bounds{1, 2, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 10000};

constexpr const char* unregistered_task = "(unregistered)";
constexpr std::size_t outcome_count = 4; // storage::outcome_state
constexpr const char* outcome_names[outcome_count] = {"done", "failed", "retry", "cancelled"};
constexpr std::size_t errc_slots = 32;

void header(std::string& out, const char* name, const char* type, const char* help) {
  fmt::format_to(std::back_inserter(out), "# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
}

} // namespace

histogram::histogram(std::vector<double> bounds)
    : bounds_(std::move(bounds)),
      buckets_(std::make_unique<std::atomic<std::uint64_t>[]>(bounds_.size() + 1)) {
  for (std::size_t i = 0; i <= bounds_.size(); ++i)
    buckets_[i].store(0, std::memory_order_relaxed);
}

void histogram::observe(double value) noexcept {
  auto i = static_cast<std::size_t>(std::lower_bound(bounds_.begin(), bounds_.end(), value) -
                                    bounds_.begin());
  buckets_[i].fetch_add(1, std::memory_order_relaxed);
  sum_.fetch_add(value, std::memory_order_relaxed);
}

void histogram::render(std::string& out, const std::string& name, const std::string& labels) const {
  auto sep = labels.empty() ? "" : ",";
  // The count is the +Inf bucket (the sum of every bucket as read here), so the two agree even
  // while attempts are observed during the scrape.
  std::uint64_t cumulative = 0;
  for (std::size_t i = 0; i < bounds_.size(); ++i) {
    cumulative += buckets_[i].load(std::memory_order_relaxed);
    fmt::format_to(std::back_inserter(out), "{}_bucket{{{}{}le=\"{}\"}} {}\n", name, labels, sep,
                   bounds_[i], cumulative);
  }
  cumulative += buckets_[bounds_.size()].load(std::memory_order_relaxed);
  fmt::format_to(std::back_inserter(out), "{}_bucket{{{}{}le=\"+Inf\"}} {}\n", name, labels, sep,
                 cumulative);
  auto wrap = labels.empty() ? std::string() : "{" + labels + "}";
  fmt::format_to(std::back_inserter(out), "{}_sum{} {}\n", name, wrap,
                 sum_.load(std::memory_order_relaxed));
  fmt::format_to(std::back_inserter(out), "{}_count{} {}\n", name, wrap, cumulative);
}

// Per queue and task: counts of finished attempts by outcome, retries, the duration and the
// wait histograms. Per queue: the claim sizes and the load gauges.
struct node_metrics::series {
  struct per_task {
    std::array<std::atomic<std::uint64_t>, outcome_count> finished{};
    histogram duration{seconds_bounds};
    histogram wait{seconds_bounds};
  };
  struct per_queue {
    std::vector<std::unique_ptr<per_task>> tasks;
    histogram claims{claim_bounds};
    std::atomic<std::int64_t> running{0};
    std::atomic<std::int64_t> prefetched{0};
  };
  std::vector<std::unique_ptr<per_queue>> queues;
  histogram flushes{flush_bounds};
  std::array<std::atomic<std::uint64_t>, errc_slots> storage_errors{};
  std::chrono::system_clock::time_point started = std::chrono::system_clock::now();
};

node_metrics::node_metrics(std::string node_name, const std::vector<std::string>& queues,
                           const std::vector<std::string>& tasks)
    : node_(std::move(node_name)), queues_(queues), tasks_(tasks), s_(std::make_unique<series>()) {
  std::sort(tasks_.begin(), tasks_.end());
  tasks_.erase(std::unique(tasks_.begin(), tasks_.end()), tasks_.end());
  tasks_.push_back(unregistered_task);
  for (std::size_t i = 0; i + 1 < tasks_.size(); ++i)
    task_index_.emplace(tasks_[i], static_cast<int>(i));
  for (std::size_t q = 0; q < queues_.size(); ++q) {
    auto block = std::make_unique<series::per_queue>();
    for (std::size_t t = 0; t < tasks_.size(); ++t)
      block->tasks.push_back(std::make_unique<series::per_task>());
    s_->queues.push_back(std::move(block));
  }
}

node_metrics::~node_metrics() = default;

int node_metrics::queue_index(const std::string& name) const {
  auto i = std::find(queues_.begin(), queues_.end(), name);
  return i == queues_.end() ? -1 : static_cast<int>(i - queues_.begin());
}

int node_metrics::task_of(const std::string& task) const noexcept {
  auto i = task_index_.find(task);
  return i == task_index_.end() ? static_cast<int>(tasks_.size() - 1) : i->second;
}

void node_metrics::attempt_started(int q, const std::string& task,
                                   std::int64_t waited_ms) noexcept {
  if (q < 0)
    return;
  auto& t =
    *s_->queues[static_cast<std::size_t>(q)]->tasks[static_cast<std::size_t>(task_of(task))];
  t.wait.observe(static_cast<double>(std::max<std::int64_t>(0, waited_ms)) / 1000.0);
}

void node_metrics::attempt_finished(int q, const std::string& task, storage::outcome_state state,
                                    std::int64_t ran_ms) noexcept {
  if (q < 0)
    return;
  auto& t =
    *s_->queues[static_cast<std::size_t>(q)]->tasks[static_cast<std::size_t>(task_of(task))];
  auto o = static_cast<std::size_t>(state);
  if (o < outcome_count)
    t.finished[o].fetch_add(1, std::memory_order_relaxed);
  if (ran_ms >= 0) // a message cancelled before it started did not run
    t.duration.observe(static_cast<double>(ran_ms) / 1000.0);
}

void node_metrics::claimed(int q, std::size_t count) noexcept {
  if (q >= 0)
    s_->queues[static_cast<std::size_t>(q)]->claims.observe(static_cast<double>(count));
}

void node_metrics::set_load(int q, std::int64_t running, std::int64_t prefetched) noexcept {
  if (q < 0)
    return;
  auto& b = *s_->queues[static_cast<std::size_t>(q)];
  b.running.store(running, std::memory_order_relaxed);
  b.prefetched.store(prefetched, std::memory_order_relaxed);
}

void node_metrics::flushed(std::size_t count) noexcept {
  s_->flushes.observe(static_cast<double>(count));
}

void node_metrics::storage_error(errc kind) noexcept {
  auto i = static_cast<std::size_t>(kind);
  if (i < errc_slots)
    s_->storage_errors[i].fetch_add(1, std::memory_order_relaxed);
}

std::string node_metrics::render() const {
  std::string out;
  out.reserve(4096 + queues_.size() * tasks_.size() * 3000);
  auto node = "node=\"" + http::label_value(node_) + "\"";
  header(out, "troupe_node_up", "gauge", "1 while this worker node runs.");
  fmt::format_to(std::back_inserter(out), "troupe_node_up{{{}}} 1\n", node);
  header(out, "troupe_node_start_time_seconds", "gauge",
         "When this worker node started, in Unix time.");
  fmt::format_to(
    std::back_inserter(out), "troupe_node_start_time_seconds{{{}}} {}\n", node,
    std::chrono::duration_cast<std::chrono::seconds>(s_->started.time_since_epoch()).count());

  auto labels = [&](std::size_t q, std::size_t t) {
    return fmt::format("queue=\"{}\",task=\"{}\"", http::label_value(queues_[q]),
                       http::label_value(tasks_[t]));
  };
  header(out, "troupe_messages_processed_total", "counter",
         "Attempts finished on this node, by queue, task and outcome (done, failed, retry, "
         "cancelled).");
  for (std::size_t q = 0; q < queues_.size(); ++q)
    for (std::size_t t = 0; t < tasks_.size(); ++t)
      for (std::size_t o = 0; o < outcome_count; ++o)
        fmt::format_to(std::back_inserter(out),
                       "troupe_messages_processed_total{{{},outcome=\"{}\"}} {}\n", labels(q, t),
                       outcome_names[o],
                       s_->queues[q]->tasks[t]->finished[o].load(std::memory_order_relaxed));
  header(out, "troupe_retries_total", "counter",
         "Failed attempts sent back to their queue to be tried again, by queue and task.");
  for (std::size_t q = 0; q < queues_.size(); ++q)
    for (std::size_t t = 0; t < tasks_.size(); ++t)
      fmt::format_to(std::back_inserter(out), "troupe_retries_total{{{}}} {}\n", labels(q, t),
                     s_->queues[q]
                       ->tasks[t]
                       ->finished[static_cast<std::size_t>(storage::outcome_state::retry)]
                       .load(std::memory_order_relaxed));
  header(out, "troupe_task_duration_seconds", "histogram",
         "How long attempts ran, by queue and task (whole milliseconds).");
  for (std::size_t q = 0; q < queues_.size(); ++q)
    for (std::size_t t = 0; t < tasks_.size(); ++t)
      s_->queues[q]->tasks[t]->duration.render(out, "troupe_task_duration_seconds", labels(q, t));
  header(out, "troupe_task_wait_seconds", "histogram",
         "From when a message became ready (published, or its eta) to the start of its attempt, "
         "by queue and task.");
  for (std::size_t q = 0; q < queues_.size(); ++q)
    for (std::size_t t = 0; t < tasks_.size(); ++t)
      s_->queues[q]->tasks[t]->wait.render(out, "troupe_task_wait_seconds", labels(q, t));
  header(out, "troupe_running", "gauge", "Attempts running on this node, by queue.");
  for (std::size_t q = 0; q < queues_.size(); ++q)
    fmt::format_to(std::back_inserter(out), "troupe_running{{queue=\"{}\"}} {}\n",
                   http::label_value(queues_[q]),
                   s_->queues[q]->running.load(std::memory_order_relaxed));
  header(out, "troupe_prefetched", "gauge",
         "Messages this node claimed and holds ready, not yet started, by queue.");
  for (std::size_t q = 0; q < queues_.size(); ++q)
    fmt::format_to(std::back_inserter(out), "troupe_prefetched{{queue=\"{}\"}} {}\n",
                   http::label_value(queues_[q]),
                   s_->queues[q]->prefetched.load(std::memory_order_relaxed));
  header(out, "troupe_claim_batch_size", "histogram",
         "Messages per claim that locked any, by queue.");
  for (std::size_t q = 0; q < queues_.size(); ++q)
    s_->queues[q]->claims.render(out, "troupe_claim_batch_size",
                                 "queue=\"" + http::label_value(queues_[q]) + "\"");
  header(out, "troupe_completion_batch_size", "histogram",
         "Outcomes written per statement by the completion batcher.");
  s_->flushes.render(out, "troupe_completion_batch_size", "");
  header(out, "troupe_storage_errors_total", "counter",
         "Failed database requests of the node's storage actors, by kind.");
  // The kinds a storage request fails with, always; any other only once it happened.
  auto listed = [](std::size_t i) {
    for (auto kind : {errc::connection_lost, errc::retryable, errc::constraint_violated, errc::bug,
                      errc::invalid_argument, errc::timeout})
      if (static_cast<std::size_t>(kind) == i)
        return true;
    return false;
  };
  for (std::size_t i = 1; i < errc_slots; ++i) {
    auto n = s_->storage_errors[i].load(std::memory_order_relaxed);
    if (listed(i) || n > 0)
      fmt::format_to(std::back_inserter(out), "troupe_storage_errors_total{{kind=\"{}\"}} {}\n",
                     to_string(static_cast<errc>(i)), n);
  }
  return out;
}

} // namespace troupe::actors
