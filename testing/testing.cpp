// The public test kit (<troupe/testing.hpp>).
#include "troupe/testing.hpp"

#include "local_postgres.hpp"
#include "storage/connection.hpp"
#include "storage/naming.hpp"
#include "troupe/caf.hpp"
#include "troupe/error.hpp"

#include <fmt/format.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <mutex>
#include <random>
#include <thread>
#include <unistd.h>

namespace troupe::testing {

namespace fs = std::filesystem;

// ---- private_cluster --------------------------------------------------------------------------

struct private_cluster::impl {
  std::string folder;
  std::optional<testkit::local_postgres> server;
  std::string dsn;
};

private_cluster::private_cluster() : impl_(std::make_unique<impl>()) {
  // The folder is named after this process, so that a later run stops and removes the cluster
  // of a test process that was killed before its destructor ran.
  testkit::local_postgres::stop_leftovers("troupe-testing-");
  auto pattern =
    (fs::temp_directory_path() / fmt::format("troupe-testing-{}-XXXXXX", ::getpid())).string();
  if (mkdtemp(pattern.data()) == nullptr)
    throw error(errc::invalid_argument,
                "private_cluster: cannot make a folder in " + fs::temp_directory_path().string());
  impl_->folder = pattern;
  try {
    impl_->server.emplace(testkit::local_postgres::start({impl_->folder}));
  } catch (...) {
    std::error_code ignored;
    fs::remove_all(impl_->folder, ignored);
    throw;
  }
  impl_->dsn = impl_->server->dsn();
}

private_cluster::~private_cluster() {
  try {
    if (impl_->server)
      impl_->server->stop();
  } catch (...) {
    // A server that would not stop ends with its folder below.
  }
  std::error_code ignored;
  fs::remove_all(impl_->folder, ignored);
}

const std::string& private_cluster::dsn() const noexcept {
  return impl_->dsn;
}

// ---- test_area --------------------------------------------------------------------------------

namespace {

std::string fresh_schema() {
  static std::mutex mutex;
  static std::mt19937_64 rng{std::random_device{}()};
  std::lock_guard guard{mutex};
  return fmt::format("t_{:012x}", rng() & 0xffffffffffffull);
}

std::string dsn_from_environment() {
  const char* dsn = std::getenv("TROUPE_TEST_DSN");
  if (dsn == nullptr || *dsn == '\0')
    throw error(errc::invalid_argument,
                "test_area: TROUPE_TEST_DSN is not set; set it to the DSN of a database the "
                "tests may create schemas in, or pass a DSN (a private_cluster's)");
  return dsn;
}

std::string quoted_table(const area& where, const std::string& table) {
  return storage::quote_identifier(where.schema) + "." +
         storage::quote_identifier(where.prefix + table);
}

} // namespace

test_area::test_area() : test_area(dsn_from_environment()) {}

test_area::test_area(const std::string& dsn) : dsn_(dsn), where_{fresh_schema(), ""} {
  admin().init();
}

test_area::~test_area() {
  client_.reset();
  admin_.reset();
  try {
    auto conn = storage::connection::open(dsn_, "troupe-testing");
    conn.exec(
      fmt::format("DROP SCHEMA IF EXISTS {} CASCADE", storage::quote_identifier(where_.schema)));
  } catch (...) {
    // A test that broke its server leaves the schema behind; its name is random.
  }
}

troupe::client& test_area::client() {
  if (!client_)
    client_ =
      std::make_unique<troupe::client>(client_options{dsn_, where_, "troupe-testing-client", {}});
  return *client_;
}

troupe::admin& test_area::admin() {
  if (!admin_) {
    admin_options o;
    o.dsn = dsn_;
    o.area = where_;
    o.application_name = "troupe-testing-admin";
    admin_ = std::make_unique<troupe::admin>(std::move(o));
  }
  return *admin_;
}

node_options test_area::node_settings(const std::vector<std::string>& queues) const {
  node_options o;
  o.dsn = dsn_;
  o.area = where_;
  o.name = "troupe-testing";
  for (const auto& name : queues) {
    queue_options q;
    q.name = name;
    q.concurrency = 4;
    o.queues.push_back(std::move(q));
  }
  return o;
}

// ---- run_inline -------------------------------------------------------------------------------

namespace {

struct collected_progress final : progress_sink {
  std::vector<std::string> values;
  void report(std::string json) noexcept override {
    try {
      values.push_back(std::move(json));
    } catch (...) {
      // Out of memory: the value is dropped, as a node would drop it.
    }
  }
};

} // namespace

inline_run run_inline(const task_registry& tasks, const message& m, const fake_context& fake) {
  const auto* entry = tasks.find(m.task);
  if (entry == nullptr)
    throw error(errc::unknown_task,
                fmt::format("no task named \"{}\" is registered in this registry", m.task));
  std::atomic<bool> cancel{fake.cancel_requested};
  std::atomic<bool> stopping{fake.shutting_down};
  collected_progress progress;
  task_context ctx{fake.message_id.empty() ? m.id : fake.message_id,
                   fake.queue.empty() ? m.queue : fake.queue,
                   m.task,
                   m.options_json,
                   fake.attempt,
                   fake.priority,
                   m.timestamp_ms,
                   m.args_json};
  ctx.deadline = std::chrono::steady_clock::now() + fake.time_limit;
  ctx.cancel_flag = &cancel;
  ctx.shutting_down = &stopping;
  ctx.notify_shutdown = fake.notify_shutdown;
  ctx.progress = &progress;
  inline_run run;
  run.result_json = entry->invoke(ctx, m.args_json);
  run.progress = std::move(progress.values);
  return run;
}

// ---- expectations on the queue ----------------------------------------------------------------

enqueued_filter enqueued_filter::like(const message& m) {
  enqueued_filter f;
  f.task = m.task;
  f.queue = m.queue;
  f.args_json = m.args_json;
  return f;
}

namespace {

std::string describe(const enqueued_filter& f) {
  std::vector<std::string> parts;
  if (f.task)
    parts.push_back("task " + *f.task);
  if (f.queue)
    parts.push_back("queue " + *f.queue);
  if (f.args_json)
    parts.push_back("arguments " + *f.args_json);
  if (f.options_json)
    parts.push_back("options containing " + *f.options_json);
  if (f.priority)
    parts.push_back("priority " + std::to_string(*f.priority));
  parts.push_back("state " + fmt::format("{}", fmt::join(f.states, " or ")));
  return fmt::format("{}", fmt::join(parts, ", "));
}

std::string describe(const enqueued_message& m) {
  return fmt::format("{} {}{} on {} (priority {}, {}{})", m.task, m.args_json,
                     m.options_json == "{}" ? "" : " options " + m.options_json, m.queue,
                     m.priority, m.state,
                     m.runs_in_ms > 0 ? fmt::format(", runs in {} ms", m.runs_in_ms) : "");
}

std::vector<enqueued_message> select_messages(const test_area& area, const enqueued_filter& f,
                                              int limit) {
  auto conn = storage::connection::open(area.dsn(), "troupe-testing");
  auto sql = fmt::format(
    "SELECT message_id::text, queue_name, task_name, args::text, options::text, priority, "
    "state::text, (extract(epoch FROM eta - clock_timestamp()) * 1000)::bigint "
    "FROM {} WHERE ($1::text IS NULL OR task_name = $1) AND ($2::text IS NULL OR queue_name = "
    "$2) AND ($3::jsonb IS NULL OR args = $3::jsonb) AND ($4::jsonb IS NULL OR options @> "
    "$4::jsonb) AND ($5::integer IS NULL OR priority = $5::integer) AND state::text = ANY "
    "($6::text[]) ORDER BY enqueued_at, message_id LIMIT {}",
    quoted_table(area.where(), "queue"), limit);
  storage::params ps{f.task,
                     f.queue,
                     f.args_json,
                     f.options_json,
                     f.priority ? std::optional<std::string>(std::to_string(*f.priority))
                                : std::nullopt,
                     storage::array_literal(f.states)};
  auto res = conn.exec_params(sql, ps, "testing.enqueued");
  std::vector<enqueued_message> out;
  for (int r = 0; r < res.rows(); ++r) {
    enqueued_message m;
    m.id = res.text(r, 0);
    m.queue = res.text(r, 1);
    m.task = res.text(r, 2);
    m.args_json = res.text(r, 3);
    m.options_json = res.text(r, 4);
    m.priority = static_cast<std::int32_t>(res.int64(r, 5));
    m.state = res.text(r, 6);
    m.runs_in_ms = res.int64(r, 7);
    out.push_back(std::move(m));
  }
  return out;
}

} // namespace

std::vector<enqueued_message> all_enqueued(const test_area& area, const enqueued_filter& filter) {
  return select_messages(area, filter, 1000);
}

enqueued_message require_enqueued(const test_area& area, const enqueued_filter& filter) {
  auto found = select_messages(area, filter, 1);
  if (!found.empty())
    return found.front();
  enqueued_filter any;
  any.states = {"queued", "running", "done", "failed", "cancelled"};
  auto there = select_messages(area, any, 10);
  std::string listed;
  for (const auto& m : there)
    listed += "\n  " + describe(m);
  throw expectation_failed(fmt::format("expected an enqueued message with {}; {}", describe(filter),
                                       there.empty() ? std::string("the queue table is empty")
                                                     : "the queue table holds:" + listed));
}

enqueued_message require_enqueued(const test_area& area, const message& m) {
  return require_enqueued(area, enqueued_filter::like(m));
}

void require_not_enqueued(const test_area& area, const enqueued_filter& filter) {
  auto found = select_messages(area, filter, 1);
  if (!found.empty())
    throw expectation_failed(fmt::format("expected no enqueued message with {}; found {} ({})",
                                         describe(filter), describe(found.front()),
                                         found.front().id));
}

void require_not_enqueued(const test_area& area, const message& m) {
  require_not_enqueued(area, enqueued_filter::like(m));
}

// ---- drain ------------------------------------------------------------------------------------

drain_report drain(test_area& area, std::shared_ptr<const task_registry> tasks,
                   drain_options options) {
  if (!tasks)
    throw error(errc::invalid_argument, "drain: no task registry");
  auto queues = options.queues.empty() ? tasks->queues() : options.queues;
  auto settings = area.node_settings(queues);
  for (auto& q : settings.queues) {
    q.concurrency = options.concurrency;
    // Moved etas are not announced: the node looks for them often.
    q.poll_interval = std::chrono::milliseconds(50);
  }
  settings.name = "troupe-testing-drain";
  auto table = quoted_table(area.where(), "queue");
  auto conn = storage::connection::open(area.dsn(), "troupe-testing");
  auto queue_list = storage::array_literal(queues);

  caf::actor_system_config cfg;
  caf::actor_system sys{cfg};
  auto node = spawn_worker_node(sys, settings, tasks);
  caf::scoped_actor self{sys};
  bool stopped_node = false;
  auto stop_node = [&]() -> node_report {
    stopped_node = true;
    node_report report;
    self->request(node, settings.shutdown_grace + std::chrono::seconds(60), stop_atom_v)
      .receive([&](const node_report& r) { report = r; },
               [&](caf::error&) { self->send_exit(node, caf::exit_reason::kill); });
    return report;
  };
  // Whatever leaves this function, the node stops first: the actor system waits for it.
  struct stop_guard {
    std::function<void()> stop;
    ~stop_guard() { stop(); }
  } guard{[&] {
    if (!stopped_node)
      stop_node();
  }};
  std::optional<std::string> failure;
  self->request(node, std::chrono::seconds(30), ready_atom_v)
    .receive([](const node_report&) {},
             [&](caf::error& err) {
               failure = "drain: the node did not start: " + troupe::describe(err);
             });
  if (failure) {
    stop_node();
    throw expectation_failed(*failure);
  }
  auto until = std::chrono::steady_clock::now() + options.timeout;
  for (;;) {
    try {
      // With scheduled messages, every queued one counts (its eta is moved next); a retry
      // written between the move and the count would otherwise look like nothing left.
      auto left = conn.exec_params(
        fmt::format("SELECT count(*) FROM {} WHERE queue_name = ANY ($1::text[]) AND (state = "
                    "'running' OR (state = 'queued' AND ($2::boolean OR eta <= now())))",
                    table),
        {queue_list, options.with_scheduled ? "true" : "false"}, "testing.drain.left");
      if (left.int64(0, 0) == 0)
        break;
      if (options.with_scheduled)
        conn.exec_params(fmt::format("UPDATE {} SET eta = now() WHERE queue_name = ANY "
                                     "($1::text[]) AND state = 'queued' AND eta > now()",
                                     table),
                         {queue_list}, "testing.drain.eta");
    } catch (const error& e) {
      failure = std::string("drain: ") + e.what();
      break;
    }
    if (std::chrono::steady_clock::now() >= until) {
      failure = fmt::format("drain: the queues {} still had messages to run after {} ms",
                            fmt::join(queues, ", "), options.timeout.count());
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  auto stopped = stop_node();
  if (failure)
    throw expectation_failed(*failure);
  drain_report report;
  report.attempts = stopped.executed;
  report.abandoned = stopped.abandoned;
  auto res = conn.exec_params(
    fmt::format("SELECT count(*) FILTER (WHERE state = 'done'), count(*) FILTER (WHERE state = "
                "'failed'), count(*) FILTER (WHERE state = 'cancelled'), count(*) FILTER (WHERE "
                "state = 'queued') FROM {} WHERE queue_name = ANY ($1::text[])",
                table),
    {queue_list}, "testing.drain.report");
  report.done = res.int64(0, 0);
  report.failed = res.int64(0, 1);
  report.cancelled = res.int64(0, 2);
  report.scheduled = res.int64(0, 3);
  return report;
}

} // namespace troupe::testing
