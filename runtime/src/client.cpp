#include "troupe/client.hpp"

#include "storage/connection.hpp"
#include "storage/queries.hpp"
#include "troupe/error.hpp"

#include <mutex>
#include <optional>

namespace troupe {

storage::new_message to_new_message(const message& m) {
  return storage::new_message{m.id,           m.queue,    m.task,     m.args_json,
                              m.options_json, m.priority, m.delay_ms, m.timestamp_ms};
}

namespace {

void check(const message& m) {
  validate_queue_name(m.queue);
  std::string canonical;
  if (!parse_uuid(m.id, canonical))
    throw error(errc::invalid_argument, "message id \"" + m.id + "\" is not a UUID");
  if (m.task.empty())
    throw error(errc::invalid_argument, "message " + m.id + " has no task name");
  if (m.delay_ms < 0)
    throw error(errc::invalid_argument, "message " + m.id + " has a negative delay");
}

} // namespace

struct client::impl {
  client_options options;
  storage::statement_set_ptr stmts;
  std::mutex mutex;
  std::optional<storage::connection> conn;

  // Runs `f(connection, first_try)`; a lost connection is reopened and `f` tried once more.
  // Every write here is one statement that either committed or did not; the retry passes
  // first_try = false so that a publish that did commit is not applied a second time.
  template <class F>
  void with_connection(F&& f) {
    std::lock_guard guard{mutex};
    for (int attempt = 0;; ++attempt) {
      try {
        if (!conn || !conn->ok())
          conn.emplace(storage::connection::open(options.dsn, options.application_name));
        f(*conn, attempt == 0);
        return;
      } catch (const error& e) {
        if (e.code() != errc::connection_lost || attempt > 0)
          throw;
        conn.reset();
      }
    }
  }
};

client::client(client_options options) : impl_(std::make_unique<impl>()) {
  validate_area(options.area);
  impl_->stmts = storage::make_statement_set(options.area);
  impl_->options = std::move(options);
}

client::~client() = default;

message client::enqueue(message m) {
  check(m);
  std::vector<storage::new_message> rows{to_new_message(m)};
  impl_->with_connection([&](storage::connection& c, bool first_try) {
    storage::enqueue_messages(c, *impl_->stmts, rows, first_try);
  });
  return m;
}

std::vector<message> client::enqueue_batch(std::vector<message> batch) {
  if (batch.empty())
    return batch;
  std::vector<storage::new_message> rows;
  rows.reserve(batch.size());
  for (const auto& m : batch) {
    check(m);
    rows.push_back(to_new_message(m));
  }
  impl_->with_connection([&](storage::connection& c, bool first_try) {
    storage::enqueue_messages(c, *impl_->stmts, rows, first_try);
  });
  return batch;
}

} // namespace troupe
