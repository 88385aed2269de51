#include "troupe/admin.hpp"

#include "runtime/src/admin_impl.hpp"
#include "storage/connection.hpp"
#include "storage/counts.hpp"
#include "storage/grants.hpp"
#include "storage/migrations.hpp"
#include "storage/operations.hpp"
#include "storage/queries.hpp"
#include "storage/shared_connection.hpp"
#include "storage/statements.hpp"
#include "troupe/dsn.hpp"
#include "troupe/error.hpp"
#include "troupe/limits.hpp"
#include "troupe/log.hpp"
#include "troupe/message.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <optional>
#include <thread>

namespace troupe {

admin::admin(admin_options options) : impl_(std::make_unique<impl>()) {
  validate_area(options.area);
  validate_dsn(options.dsn);
  impl_->stmts = storage::make_statement_set(options.area);
  auto warning = options.on_warning;
  impl_->conn.emplace(options.dsn, options.application_name, [warning](storage::connection& c) {
    if (warning)
      c.on_warning([warning](std::string_view text) { warning(std::string(text)); });
    else
      c.on_warning([](std::string_view text) { log().warn("postgres: {}", text); });
  });
  impl_->options = std::move(options);
}

admin::~admin() = default;

const area& admin::where() const noexcept {
  return impl_->options.area;
}

migration_report admin::init() {
  return impl_->migrate(false);
}

migration_report admin::upgrade() {
  return impl_->migrate(true);
}

int admin::version() {
  return impl_->with_connection(
    [&](storage::connection& c) { return storage::current_version(c, *impl_->stmts); });
}

int admin::latest_version() noexcept {
  return storage::latest_migration();
}

std::string admin::grants_sql(const area& where, const area_roles& roles) {
  validate_area(where);
  if (roles.producer.empty() && roles.node.empty() && roles.operator_role.empty())
    throw error(errc::invalid_argument, "no role given: name a producer, node or operator role");
  return storage::grants_script(where, roles);
}

std::string admin::migration_sql(const area& where, int from_version) {
  validate_area(where);
  if (from_version < 0 || from_version > storage::latest_migration())
    throw error(errc::invalid_argument,
                "version " + std::to_string(from_version) + " is not between 0 and " +
                  std::to_string(storage::latest_migration()) + ", this Troupe's latest");
  return storage::migration_script(where, from_version);
}

std::vector<queue_stats> admin::stats(const std::optional<std::string>& queue) {
  if (queue)
    validate_queue_name(*queue);
  return impl_->with_connection([&](storage::connection& c) {
    impl_->require_initialized(c);
    return storage::queue_statistics(c, *impl_->stmts, queue ? &*queue : nullptr);
  });
}

std::int64_t admin::recount_stats(std::chrono::milliseconds lock_wait) {
  return impl_->with_connection([&](storage::connection& c) {
    impl_->require_operations(c, "recounting the statistics");
    return storage::recount_states(c, *impl_->stmts, lock_wait);
  });
}

std::vector<node_status> admin::nodes() {
  return impl_->with_connection([&](storage::connection& c) {
    impl_->require_initialized(c);
    return storage::list_nodes(c, *impl_->stmts);
  });
}

bool admin::wait_for_nodes(const std::string& queue, std::size_t count,
                           std::chrono::milliseconds timeout) {
  if (!queue.empty())
    validate_queue_name(queue);
  auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    auto all = nodes();
    auto live = std::count_if(all.begin(), all.end(), [&](const node_status& n) {
      return n.alive && (queue.empty() ||
                         std::find(n.queues.begin(), n.queues.end(), queue) != n.queues.end());
    });
    if (static_cast<std::size_t>(live) >= count)
      return true;
    if (std::chrono::steady_clock::now() >= deadline)
      return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

namespace {

void validate_filter(const message_filter& f, bool states_allowed) {
  if (f.queue)
    validate_queue_name(*f.queue);
  if (f.task && (f.task->empty() || f.task->size() > limits::max_task_name))
    throw error(errc::invalid_argument,
                fmt::format("task name filter must be 1 to {} bytes", limits::max_task_name));
  for (const auto& st : f.states)
    if (!states_allowed || (st != "queued" && st != "running"))
      throw error(errc::invalid_argument,
                  "state filter \"" + st + "\" is not one of queued, running");
}

} // namespace

const char* to_string(cancel_outcome o) noexcept {
  switch (o) {
  case cancel_outcome::missing:
    return "missing";
  case cancel_outcome::cancelled:
    return "cancelled";
  case cancel_outcome::requested:
    return "requested";
  case cancel_outcome::terminal:
    return "terminal";
  }
  return "missing";
}

const char* to_string(retry_outcome o) noexcept {
  switch (o) {
  case retry_outcome::retried:
    return "retried";
  case retry_outcome::missing:
    return "missing";
  case retry_outcome::not_failed:
    return "not_failed";
  }
  return "missing";
}

queue_control admin::pause(const std::string& queue) {
  validate_queue_name(queue);
  return impl_->with_connection([&](storage::connection& c) {
    impl_->require_operations(c, "pausing a queue");
    return storage::set_queue_paused(c, *impl_->stmts, queue, true);
  });
}

queue_control admin::resume(const std::string& queue) {
  validate_queue_name(queue);
  return impl_->with_connection([&](storage::connection& c) {
    impl_->require_operations(c, "resuming a queue");
    return storage::set_queue_paused(c, *impl_->stmts, queue, false);
  });
}

std::vector<queue_control> admin::queue_status(const std::optional<std::string>& queue) {
  if (queue)
    validate_queue_name(*queue);
  return impl_->with_connection([&](storage::connection& c) {
    impl_->require_operations(c, "queue status");
    std::vector<std::string> only;
    if (queue)
      only.push_back(*queue);
    return storage::queue_control_status(c, *impl_->stmts, only);
  });
}

cancel_report admin::cancel(const std::string& given) {
  auto id = message_id(given);
  return impl_->with_connection([&](storage::connection& c) {
    impl_->require_operations(c, "cancelling a message");
    return storage::cancel_message(c, *impl_->stmts, id);
  });
}

cancel_counts admin::cancel_matching(const message_filter& filter) {
  validate_filter(filter, true);
  return impl_->with_connection([&](storage::connection& c) {
    impl_->require_operations(c, "cancelling messages");
    cancel_counts total;
    // Rows a claim or a completion holds are skipped by a pass: the next one takes them. A
    // pass that changes nothing while some are left waits a little first.
    for (int idle = 0; idle < 50;) {
      auto n = storage::cancel_matching(c, *impl_->stmts, filter, 1000);
      total.cancelled += n.cancelled;
      total.requested += n.requested;
      if (n.cancelled + n.requested > 0) {
        idle = 0;
        continue;
      }
      if (!storage::matching_left(c, *impl_->stmts, filter))
        break;
      ++idle;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return total;
  });
}

cancel_state admin::cancel_status(const std::string& given) {
  auto id = message_id(given);
  return impl_->with_connection([&](storage::connection& c) {
    impl_->require_operations(c, "cancel status");
    return storage::cancel_status(c, *impl_->stmts, id);
  });
}

failed_page admin::failed(const failed_query& query) {
  if (query.limit < 1 || query.limit > 1000)
    throw error(errc::invalid_argument,
                "limit " + std::to_string(query.limit) + " is not between 1 and 1000");
  auto q = query;
  if (q.after)
    q.after = message_id(*q.after);
  validate_filter(message_filter{query.queue, query.task, {}}, false);
  return impl_->with_connection([&](storage::connection& c) {
    impl_->require_initialized(c);
    return storage::failed_messages(c, *impl_->stmts, q);
  });
}

failed_message admin::show_failed(const std::string& given) {
  auto id = message_id(given);
  return impl_->with_connection([&](storage::connection& c) {
    impl_->require_initialized(c);
    std::string state;
    auto m = storage::failed_message_by_id(c, *impl_->stmts, id, state);
    if (!m)
      throw error(errc::not_found, state.empty()
                                     ? "no message has id " + id
                                     : "message " + id + " is " + state + ", not failed");
    return *m;
  });
}

retry_report admin::retry(const std::string& given) {
  auto id = message_id(given);
  return impl_->with_connection([&](storage::connection& c) {
    impl_->require_operations(c, "retrying a message");
    return storage::retry_message(c, *impl_->stmts, id);
  });
}

std::int64_t admin::purge(const std::string& older_than, const std::vector<std::string>& states,
                          const std::function<void(std::int64_t)>& progress) {
  std::vector<std::string> which = states;
  if (which.empty())
    which = {"done", "failed", "cancelled"};
  for (const auto& st : which)
    if (st != "done" && st != "failed" && st != "cancelled")
      throw error(errc::invalid_argument,
                  "state \"" + st + "\" is not one of done, failed, cancelled");
  if (older_than.empty())
    throw error(errc::invalid_argument, "the age of the rows to purge is empty");
  return impl_->with_connection([&](storage::connection& c) {
    impl_->require_initialized(c);
    std::int64_t total = 0;
    for (;;) {
      auto n = storage::purge_older(c, *impl_->stmts, which, older_than, 10000);
      total += n;
      if (progress && n > 0)
        progress(total);
      if (n == 0)
        break;
    }
    return total;
  });
}

recover_report admin::recover() {
  return impl_->with_connection([&](storage::connection& c) {
    impl_->require_initialized(c);
    // A first pass marks nodes whose lock is free; the second, with a grace below zero, finds
    // them dead at once.
    recover_report r;
    for (int pass = 0; pass < 2; ++pass) {
      auto rep = storage::reap_dead_nodes(c, *impl_->stmts, std::chrono::milliseconds{-1});
      r.dead_nodes += rep.dead_nodes;
      r.recovered += rep.recovered;
    }
    return r;
  });
}

std::int64_t admin::flush(const std::string& queue) {
  validate_queue_name(queue);
  return impl_->with_connection([&](storage::connection& c) {
    impl_->require_initialized(c);
    std::int64_t total = 0;
    for (;;) {
      auto n = storage::flush_queue(c, *impl_->stmts, queue, 10000);
      total += n;
      if (n == 0)
        break;
    }
    return total;
  });
}

std::int64_t admin::retry_matching(const message_filter& filter) {
  validate_filter(message_filter{filter.queue, filter.task, {}}, false);
  return impl_->with_connection([&](storage::connection& c) {
    impl_->require_operations(c, "retrying messages");
    std::int64_t total = 0;
    auto begun = storage::database_now(c, *impl_->stmts);
    for (;;) {
      auto n = storage::retry_matching(c, *impl_->stmts, filter, 1000, begun);
      total += n;
      if (n == 0)
        break;
    }
    return total;
  });
}

} // namespace troupe