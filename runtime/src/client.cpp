#include "troupe/client.hpp"

#include "composition_access.hpp"
#include "publish_plan.hpp"
#include "results.hpp"

#include "storage/connection.hpp"
#include "storage/migrations.hpp"
#include "storage/operations.hpp"
#include "storage/queries.hpp"
#include "storage/shared_connection.hpp"
#include "troupe/dsn.hpp"
#include "troupe/error.hpp"
#include "troupe/log.hpp"
#include "troupe/options.hpp"

#include <optional>

namespace troupe {

std::string detail::result_of(const storage::finished_message& m) {
  if (m.state == "done") {
    if (m.result_expired)
      throw result_error(errc::not_found,
                         "message " + m.id + " finished, but its result expired (result_ttl)");
    if (m.result_json.empty())
      throw result_error(errc::not_found, "message " + m.id +
                                            " finished, but its task does not store results "
                                            "(task_options::store_results)");
    return m.result_json;
  }
  if (m.state == "cancelled")
    throw result_error(errc::task_cancelled, "message " + m.id + " was cancelled");
  auto type = option_string(m.error_json, "type").value_or("unknown");
  auto text = option_string(m.error_json, "text").value_or("");
  if (option_bool(m.error_json, "skipped").value_or(false))
    throw result_error(errc::task_skipped, "message " + m.id + " was skipped: " + text, type, text);
  throw result_error(errc::task_failed, "message " + m.id + " failed: " + type + ": " + text, type,
                     text);
}

struct client::impl {
  client_options options;
  storage::statement_set_ptr stmts;
  // Every write is one statement or one transaction that either committed or did not; a
  // retry after a lost connection restarts the plan without reviving what may have run.
  std::optional<storage::shared_connection> conn;
};

client::client(client_options options) : impl_(std::make_unique<impl>()) {
  validate_area(options.area);
  validate_dsn(options.dsn);
  impl_->stmts = storage::make_statement_set(options.area);
  // Publishing runs the same statements at every schema version; reading results follows the
  // area's (its expiry needs migration 5), checked on every connection the client opens.
  impl_->conn.emplace(
    options.dsn, options.application_name,
    [stmts = impl_->stmts](storage::connection& c) { storage::follow_area_version(c, *stmts); });
  impl_->options = std::move(options);
}

client::~client() = default;

message client::enqueue(message m, const enqueue_options& options) {
  std::vector<message> one;
  one.push_back(std::move(m));
  return std::move(enqueue_many(std::move(one), {options}).front());
}

std::vector<message> client::enqueue_many(std::vector<message> batch,
                                          std::vector<enqueue_options> options) {
  detail::publish_plan plan(impl_->stmts, std::move(batch), std::move(options),
                            impl_->options.middleware, true);
  if (plan.empty())
    return {};
  impl_->conn->with([&](storage::connection& c, bool first_try) {
    if (!first_try)
      plan.restart(false);
    detail::run_on_own_connection(c, plan);
  });
  return plan.finish(false);
}

std::string client::get_result_json(const std::string& id, bool block,
                                    std::chrono::milliseconds timeout) {
  std::string canonical;
  if (!parse_uuid(id, canonical))
    throw error(errc::invalid_argument, "message id \"" + id + "\" is not a UUID");
  auto look = [&](storage::connection& c) -> std::optional<std::string> {
    auto found = storage::read_results(c, *impl_->stmts, {canonical});
    if (!found.empty())
      return detail::result_of(found.front());
    return std::nullopt;
  };
  if (!block) {
    std::optional<std::string> out;
    bool exists = false;
    impl_->conn->with([&](storage::connection& c, bool) {
      out = look(c);
      exists = out || storage::message_exists(c, *impl_->stmts, canonical);
    });
    if (out)
      return *out;
    throw result_error(errc::not_found, exists ? "message " + canonical + " has not finished yet"
                                               : "no message " + canonical + " in this area");
  }
  // Waiting gets a connection of its own: the publishing connection stays free meanwhile.
  using clock = std::chrono::steady_clock;
  auto deadline = clock::now() + timeout;
  auto conn = storage::connection::open(impl_->options.dsn, impl_->options.application_name);
  storage::follow_area_version(conn, *impl_->stmts);
  storage::listen_for_results(conn, *impl_->stmts);
  for (;;) {
    if (auto out = look(conn))
      return *out;
    auto now = clock::now();
    auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - now);
    if (now >= deadline)
      throw result_error(errc::timeout, "no result for message " + canonical + " within " +
                                          std::to_string(timeout.count()) + "ms");
    // Woken by a completion's notification; a poll once a second covers a lost one.
    conn.wait_for_notifications(std::min(left, std::chrono::milliseconds{1000}));
  }
}

namespace detail {

void client_access::with_connection(
  client& c,
  const std::function<void(storage::connection&, const storage::statement_set&, bool)>& f) {
  c.impl_->conn->with(
    [&](storage::connection& conn, bool first_try) { f(conn, *c.impl_->stmts, first_try); });
}

storage::connection client_access::open_own(client& c) {
  auto conn = storage::connection::open(c.impl_->options.dsn, c.impl_->options.application_name);
  storage::follow_area_version(conn, *c.impl_->stmts);
  return conn;
}

storage::statement_set_ptr client_access::statements(client& c) {
  return c.impl_->stmts;
}

group_status client_access::read_group(client& c, const std::string& canonical_id) {
  std::optional<storage::group_row> row;
  int version = 0;
  c.impl_->conn->with([&](storage::connection& conn, bool) {
    version = c.impl_->stmts->version();
    if (version >= groups_version)
      row = storage::read_group(conn, *c.impl_->stmts, canonical_id);
  });
  if (version < groups_version)
    throw groups_missing(version);
  if (!row)
    throw error(errc::not_found, "no group " + canonical_id + " in this area");
  group_status s;
  s.id = row->id;
  s.state = row->state;
  s.total = row->total;
  s.succeeded = row->succeeded;
  s.failed = row->failed;
  s.error_json = row->error_json;
  s.created_at_ms = row->created_at_ms;
  s.finished_at_ms = row->finished_at_ms;
  return s;
}

int client_access::area_version(client& c) {
  int version = 0;
  c.impl_->conn->with([&](storage::connection&, bool) { version = c.impl_->stmts->version(); });
  return version;
}

} // namespace detail

} // namespace troupe
