#include "troupe/scheduler.hpp"

#include "publish_plan.hpp"
#include "schedule_times.hpp"
#include "storage/migrations.hpp"
#include "storage/schedules.hpp"
#include "storage/shared_connection.hpp"
#include "troupe/dsn.hpp"
#include "troupe/error.hpp"
#include "troupe/log.hpp"
#include "troupe/message.hpp"

#include <fmt/format.h>

#include <optional>
#include <random>
#include <thread>

namespace troupe {

namespace {

// A deduplication key outlives every retry of a tick and every clock skew between schedulers.
constexpr auto key_lifetime = std::chrono::hours(24 * 7);

std::int64_t ms_of(std::chrono::system_clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count();
}

// Whether catch-up none drops the due occurrence. A scheduler finds an occurrence up to a poll
// late when all is well, so twice its poll is on time; found later than that with a later
// occurrence due too, or later than the grace (a minute, or twice the poll when longer), it was
// missed.
bool missed(const storage::due_schedule& d, std::int64_t now_ms, std::chrono::milliseconds poll) {
  if (d.catch_up != catch_up_policy::none)
    return false;
  auto late = now_ms - d.occurrence_ms;
  auto on_time = 2 * poll.count();
  if (late > std::max<std::int64_t>(detail::catch_up_grace_ms, on_time))
    return true;
  if (late <= on_time)
    return false;
  detail::cadence c{d.interval_ms, d.cron, d.time_zone};
  return detail::next_occurrence(c, d.occurrence_ms, d.occurrence_ms) <= now_ms;
}

} // namespace

void validate_scheduler_options(const scheduler_options& o) {
  validate_area(o.area);
  validate_dsn(o.dsn);
  if (o.poll < std::chrono::milliseconds(10) || o.poll > std::chrono::hours(1))
    throw error(errc::invalid_argument,
                fmt::format("scheduler poll {} ms is out of range (10 ms to 1 h)", o.poll.count()));
  if (o.batch < 1 || o.batch > 1000)
    throw error(errc::invalid_argument,
                fmt::format("scheduler batch {} is out of range (1 to 1000)", o.batch));
}

struct scheduler::impl {
  scheduler_options options;
  storage::statement_set_ptr stmts;
  std::optional<storage::shared_connection> conn;
  std::mt19937_64 random{std::random_device{}()};

  // The area's version decides the statements; an area without schedules is refused.
  void require_schedules(storage::connection& c) {
    auto v = storage::current_version(c, *stmts);
    if (v == 0)
      throw error(errc::not_found, fmt::format("schema \"{}\" (prefix \"{}\") is not initialized; "
                                               "run troupe init",
                                               options.area.schema, options.area.prefix));
    if (v < storage::schedules_version)
      throw storage::schedules_missing(v);
    if (v <= storage::latest_migration() && v != stmts->version())
      stmts->use_version(v);
  }

  // Publishes `d`'s occurrence inside the tick's transaction: its derived id and key make a
  // second publish of the same occurrence (a tick retried after a lost commit) a no-op.
  std::string publish(storage::connection& c, const storage::due_schedule& d, std::int64_t now_ms) {
    message m;
    m.id = d.message_id;
    m.queue = d.queue;
    m.task = d.task;
    m.args_json = d.args_json;
    m.options_json = d.options_json;
    m.priority = d.priority;
    m.timestamp_ms = now_ms;
    enqueue_options o = enqueue_options::deduplicated(
      fmt::format("troupe:schedule:{}:{}", d.id, d.occurrence_text), key_lifetime);
    if (d.jitter_ms > 0)
      o.delay = std::chrono::milliseconds(
        std::uniform_int_distribution<std::int64_t>(0, d.jitter_ms)(random));
    std::vector<message> one{std::move(m)};
    detail::publish_plan plan(stmts, std::move(one), {o}, {}, false);
    while (auto step = plan.next())
      plan.accept(c.run(*step->statement, step->values));
    return plan.finish(true).front().id;
  }

  // Publishes `d`'s occurrence behind a savepoint: a message the database or the publish rules
  // refuse fails this occurrence (outcome failed, with the reason) and the schedule moves on, so
  // that one bad schedule never holds up the others. A lost connection fails the tick.
  void publish_one(storage::connection& c, const storage::due_schedule& d, std::int64_t now_ms,
                   schedule_occurrence& o) {
    storage::occurrence_savepoint(c);
    try {
      o.message_id = publish(c, d, now_ms);
      o.outcome = "published";
      storage::release_occurrence_savepoint(c);
    } catch (const error& e) {
      if (e.code() == errc::connection_lost || e.code() == errc::retryable)
        throw;
      storage::rollback_to_occurrence_savepoint(c);
      o.outcome = "failed";
      o.message_id.clear();
      o.error = e.what();
      log().warn("schedule {}: the occurrence {} was not published: {}", d.name, d.occurrence_text,
                 e.what());
    }
  }

  std::vector<schedule_occurrence> tick(storage::connection& c) {
    require_schedules(c);
    std::vector<schedule_occurrence> out;
    c.begin("schedule_tick");
    try {
      auto now_ms = options.clock ? ms_of(options.clock()) : storage::database_clock_ms(c, *stmts);
      for (const auto& d : storage::lock_due_schedules(c, *stmts, now_ms, options.batch)) {
        schedule_occurrence o;
        o.schedule = d.name;
        o.occurrence_ms = d.occurrence_ms;
        detail::cadence cadence{d.interval_ms, d.cron, d.time_zone};
        o.next_run_ms = detail::next_occurrence(cadence, d.occurrence_ms, now_ms);
        if (missed(d, now_ms, options.poll))
          o.outcome = "missed";
        else if (d.overlap == overlap_policy::skip && d.previous_active)
          o.outcome = "overlap";
        else
          publish_one(c, d, now_ms, o);
        storage::advance_schedule(
          c, *stmts, d.id, o.next_run_ms, o.outcome,
          o.message_id.empty() ? std::nullopt : std::optional<std::string>(o.message_id),
          o.error.empty() ? std::nullopt : std::optional<std::string>(o.error));
        out.push_back(std::move(o));
      }
      if (options.before_commit)
        options.before_commit();
      c.commit("schedule_tick");
    } catch (...) {
      c.rollback_quietly();
      throw;
    }
    return out;
  }
};

scheduler::scheduler(scheduler_options options) : impl_(std::make_unique<impl>()) {
  validate_scheduler_options(options);
  impl_->stmts = storage::make_statement_set(options.area);
  impl_->conn.emplace(options.dsn, options.application_name);
  impl_->options = std::move(options);
}

scheduler::~scheduler() = default;

std::vector<schedule_occurrence> scheduler::tick() {
  // A tick that lost its connection runs once more: if its commit went through, the schedules
  // moved on and are not due; if not, the same occurrences publish under the same keys.
  return impl_->conn->with([&](storage::connection& c, bool) { return impl_->tick(c); });
}

std::int64_t
scheduler::run(const std::atomic<bool>& stop,
               const std::function<void(const std::vector<schedule_occurrence>&)>& on_tick,
               const std::function<void(const std::string&)>& on_error) {
  std::int64_t published = 0;
  while (!stop.load()) {
    bool full = false;
    try {
      auto done = tick();
      for (const auto& o : done)
        published += o.outcome == "published" ? 1 : 0;
      full = done.size() >= static_cast<std::size_t>(impl_->options.batch);
      if (on_tick && !done.empty())
        on_tick(done);
    } catch (const error& e) {
      if (!on_error)
        throw;
      on_error(e.what());
    }
    if (full)
      continue;
    auto until = std::chrono::steady_clock::now() + impl_->options.poll;
    while (!stop.load() && std::chrono::steady_clock::now() < until)
      std::this_thread::sleep_for(std::min<std::chrono::steady_clock::duration>(
        std::chrono::milliseconds(100), until - std::chrono::steady_clock::now()));
  }
  return published;
}

} // namespace troupe
