// The admin API's schedules (troupe/admin.hpp, docs/scheduler.md): create, read, enable,
// disable and delete. The scheduler (scheduler.cpp) publishes their occurrences.
#include "runtime/src/admin_impl.hpp"
#include "schedule_times.hpp"
#include "storage/migrations.hpp"
#include "storage/schedules.hpp"
#include "troupe/admin.hpp"

#include <fmt/format.h>

namespace troupe {

namespace {

void require_schedules(storage::connection& c, const storage::statement_set& stmts) {
  auto v = storage::current_version(c, stmts);
  if (v != 0 && v < storage::schedules_version)
    throw storage::schedules_missing(v);
}

void check_name(const std::string& name) {
  if (name.empty())
    throw error(errc::invalid_argument, "a schedule needs a name");
}

} // namespace

schedule_record admin::create_schedule(const schedule_spec& spec) {
  detail::validate_schedule_spec(spec);
  return impl_->with_connection([&](storage::connection& c) {
    impl_->require_initialized(c);
    require_schedules(c, *impl_->stmts);
    auto start_ms =
      spec.start_at
        ? std::chrono::duration_cast<std::chrono::milliseconds>(spec.start_at->time_since_epoch())
            .count()
        : storage::database_clock_ms(c, *impl_->stmts);
    detail::cadence cadence;
    if (spec.interval)
      cadence.interval_ms = spec.interval->count();
    else
      cadence = {std::nullopt, spec.cron, spec.time_zone};
    auto next = detail::first_occurrence(cadence, start_ms);
    if (!storage::create_schedule(c, *impl_->stmts, spec, start_ms, next))
      throw error(
        errc::constraint_violated,
        fmt::format("schedule \"{}\" exists already: delete it first to replace it", spec.name));
    return std::move(storage::list_schedules(c, *impl_->stmts, true, spec.name).front());
  });
}

std::vector<schedule_record> admin::schedules() {
  return impl_->with_connection([&](storage::connection& c) {
    impl_->require_initialized(c);
    require_schedules(c, *impl_->stmts);
    return storage::list_schedules(c, *impl_->stmts, false);
  });
}

std::optional<schedule_record> admin::schedule(const std::string& name) {
  check_name(name);
  return impl_->with_connection([&](storage::connection& c) -> std::optional<schedule_record> {
    impl_->require_initialized(c);
    require_schedules(c, *impl_->stmts);
    auto found = storage::list_schedules(c, *impl_->stmts, true, name);
    if (found.empty())
      return std::nullopt;
    return std::move(found.front());
  });
}

std::vector<std::int64_t> admin::upcoming_runs(const std::string& name, int count) {
  if (count < 1 || count > 100)
    throw error(errc::invalid_argument, fmt::format("count {} is out of range (1 to 100)", count));
  auto s = schedule(name);
  if (!s)
    throw error(errc::not_found, fmt::format("no schedule \"{}\"", name));
  detail::cadence cadence{s->interval_ms, s->cron, s->time_zone};
  return detail::upcoming(cadence, s->next_run_ms, count);
}

bool admin::enable_schedule(const std::string& name) {
  check_name(name);
  return impl_->with_connection([&](storage::connection& c) {
    impl_->require_initialized(c);
    require_schedules(c, *impl_->stmts);
    return storage::set_schedule_enabled(c, *impl_->stmts, name, true);
  });
}

bool admin::disable_schedule(const std::string& name) {
  check_name(name);
  return impl_->with_connection([&](storage::connection& c) {
    impl_->require_initialized(c);
    require_schedules(c, *impl_->stmts);
    return storage::set_schedule_enabled(c, *impl_->stmts, name, false);
  });
}

bool admin::delete_schedule(const std::string& name) {
  check_name(name);
  return impl_->with_connection([&](storage::connection& c) {
    impl_->require_initialized(c);
    require_schedules(c, *impl_->stmts);
    return storage::delete_schedule(c, *impl_->stmts, name);
  });
}

} // namespace troupe
