#include "troupe/admin.hpp"

#include "storage/connection.hpp"
#include "storage/migrations.hpp"
#include "storage/queries.hpp"
#include "storage/shared_connection.hpp"
#include "storage/statements.hpp"
#include "troupe/dsn.hpp"
#include "troupe/error.hpp"
#include "troupe/log.hpp"

#include <algorithm>
#include <optional>
#include <thread>

namespace troupe {

namespace {

std::string area_name(const area& a) {
  // Schema and prefix are validated identifiers ([a-z0-9_]): nothing to escape.
  return a.prefix.empty() ? "schema " + a.schema
                          : "schema " + a.schema + " (prefix \"" + a.prefix + "\")";
}

} // namespace

struct admin::impl {
  admin_options options;
  storage::statement_set_ptr stmts;
  std::optional<storage::shared_connection> conn;

  // Runs `f` on the connection; a connection lost before or during `f` is reopened and `f`
  // run once more (every admin call is a read, or migrations, which are idempotent).
  template <class F>
  auto with_connection(F&& f) -> decltype(f(std::declval<storage::connection&>())) {
    return conn->with([&](storage::connection& c, bool) { return f(c); });
  }

  void require_initialized(storage::connection& c) {
    if (storage::current_version(c, *stmts) == 0)
      throw error(errc::not_found,
                  area_name(stmts->where()) + " is not initialized; run troupe init");
  }

  migration_report migrate(bool require_existing) {
    return with_connection([&](storage::connection& c) {
      migration_report r;
      r.from_version = storage::current_version(c, *stmts);
      if (require_existing && r.from_version == 0)
        require_initialized(c);
      r.applied = storage::migrate(c, *stmts);
      r.to_version = storage::current_version(c, *stmts);
      return r;
    });
  }
};

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

} // namespace troupe
