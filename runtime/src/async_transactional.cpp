#include "troupe/async_transactional.hpp"

#include "publish_plan.hpp"
#include "storage/borrowed_connection.hpp"
#include "troupe/error.hpp"

#include <poll.h>

#include <exception>
#include <string>

namespace troupe {

namespace {

enum class step_kind { savepoint, plan, release, rollback, release_after_rollback };

} // namespace

struct async_publish::impl {
  storage::borrowed_connection conn;
  detail::publish_plan plan;
  bool savepoint = false;

  // What is in flight, and whether its text still has to be flushed to the socket.
  std::optional<step_kind> current;
  std::optional<detail::publish_step> current_step;
  bool flushing = false;
  bool finished = false;
  bool cancel_requested = false;
  std::exception_ptr failure;
  std::vector<message> published;

  impl(storage::borrowed_connection c, detail::publish_plan p, bool sp)
      : conn(c), plan(std::move(p)), savepoint(sp) {}

  void send(step_kind kind) {
    using savepoint_step = storage::borrowed_connection::savepoint_step;
    current = kind;
    switch (kind) {
    case step_kind::savepoint:
      conn.send(savepoint_step::begin);
      break;
    case step_kind::release:
    case step_kind::release_after_rollback:
      conn.send(savepoint_step::release);
      break;
    case step_kind::rollback:
      conn.send(savepoint_step::rollback);
      break;
    case step_kind::plan:
      conn.send(*current_step->statement, current_step->values);
      break;
    }
    flushing = true;
  }

  // Sends what comes after a completed step; false when the publish is over.
  bool send_next() {
    // A cancellation that came between statements stops the publish at the next one.
    if (cancel_requested && !failure && savepoint && current != step_kind::release &&
        current != step_kind::savepoint)
      failure = std::make_exception_ptr(
        error(errc::cancelled, "publish cancelled by the caller; its writes were rolled back to "
                               "the savepoint"));
    if (failure) {
      if (savepoint && current == step_kind::rollback) {
        send(step_kind::release_after_rollback);
        return true;
      }
      if (savepoint && current != step_kind::release_after_rollback &&
          current != step_kind::savepoint) {
        send(step_kind::rollback);
        return true;
      }
      return false;
    }
    if (current == step_kind::release)
      return false;
    if (cancel_requested && savepoint && current == step_kind::savepoint) {
      failure = std::make_exception_ptr(
        error(errc::cancelled, "publish cancelled by the caller before it wrote anything"));
      send(step_kind::rollback);
      return true;
    }
    try {
      current_step = plan.next();
    } catch (...) {
      // Not the connection's fault: what the savepoint holds is rolled back like a failed
      // statement's.
      failure = std::current_exception();
      if (!savepoint)
        return false;
      send(step_kind::rollback);
      return true;
    }
    if (current_step) {
      send(step_kind::plan);
      return true;
    }
    if (savepoint) {
      send(step_kind::release);
      return true;
    }
    return false;
  }

  void step_done(const storage::result& owned) {
    if (!owned.ok()) {
      if (!failure) {
        try {
          conn.raise(owned, current == step_kind::plan ? current_step->statement->name
                                                       : std::string("savepoint"));
        } catch (const error& e) {
          if (cancel_requested && e.sqlstate() == "57014")
            failure = std::make_exception_ptr(
              error(errc::cancelled, "publish cancelled by the caller; its writes were " +
                                       std::string(savepoint ? "rolled back to the savepoint"
                                                             : "not made, and the transaction "
                                                               "must be rolled back")));
          else
            failure = std::current_exception();
        }
      }
      return;
    }
    if (current != step_kind::plan || failure)
      return;
    // A before_enqueue hook runs here, once the keys are claimed. What it throws fails the
    // publish, and the savepoint is rolled back so the claimed keys are freed.
    try {
      plan.accept(owned);
    } catch (...) {
      failure = std::current_exception();
    }
  }

  bool advance() {
    if (finished)
      return true;
    try {
      for (;;) {
        if (!current) {
          if (!send_next())
            return finish();
        }
        if (flushing) {
          if (!conn.flush())
            return false;
          flushing = false;
        }
        conn.consume_input();
        bool completed = false;
        while (conn.result_ready()) {
          auto res = conn.next_result();
          if (!res) {
            completed = true;
            break;
          }
          step_done(*res);
        }
        if (!completed)
          return false;
        // The step is over; what follows depends on how it went.
        if (!send_next())
          return finish();
      }
    } catch (...) {
      // The connection itself failed: nothing more can be sent on it.
      if (!failure)
        failure = std::current_exception();
      return finish();
    }
  }

  bool finish() {
    finished = true;
    current.reset();
    if (!failure) {
      try {
        published = plan.finish(true);
      } catch (...) {
        failure = std::current_exception();
      }
    }
    return true;
  }
};

async_publish::async_publish(std::unique_ptr<impl> p) : impl_(std::move(p)) {}
async_publish::async_publish(async_publish&&) noexcept = default;
async_publish& async_publish::operator=(async_publish&&) noexcept = default;

async_publish::~async_publish() {
  if (!impl_ || impl_->finished)
    return;
  // Leave the caller's connection settled: cancel, then wait for the last result.
  cancel();
  while (!impl_->advance()) {
    pollfd pfd{impl_->conn.socket(), static_cast<short>(POLLIN | (wants_write() ? POLLOUT : 0)), 0};
    ::poll(&pfd, 1, 100);
  }
}

namespace {

void require_nonblocking(const storage::borrowed_connection& conn, std::string_view what) {
  detail::require_transaction(conn, what);
  if (!conn.nonblocking())
    throw error(errc::invalid_argument, std::string(what) +
                                          " requires a connection in non-blocking mode "
                                          "(PQsetnonblocking); use enqueue_in_transaction for a "
                                          "blocking one. Nothing was written");
  if (conn.busy())
    throw error(errc::invalid_argument,
                std::string(what) + ": the connection still has a statement in flight");
}

} // namespace

async_publish async_publish::single(pg_conn* native, const area& where, message m,
                                    const enqueue_options& options,
                                    std::vector<middleware_ptr> middleware) {
  storage::borrowed_connection conn(native);
  require_nonblocking(conn, "async_publish::single");
  std::vector<message> one;
  one.push_back(std::move(m));
  detail::publish_plan plan(detail::statements_for(where), std::move(one), {options}, middleware,
                            true);
  bool savepoint = plan.multi_step();
  async_publish out(std::make_unique<impl>(conn, std::move(plan), savepoint));
  if (savepoint)
    out.impl_->send(step_kind::savepoint);
  out.poll();
  return out;
}

async_publish async_publish::many(pg_conn* native, const area& where, std::vector<message> batch,
                                  std::vector<enqueue_options> options,
                                  std::vector<middleware_ptr> middleware) {
  storage::borrowed_connection conn(native);
  require_nonblocking(conn, "async_publish::many");
  detail::publish_plan plan(detail::statements_for(where), std::move(batch), std::move(options),
                            middleware, true);
  bool savepoint = !plan.empty();
  async_publish out(std::make_unique<impl>(conn, std::move(plan), savepoint));
  if (savepoint)
    out.impl_->send(step_kind::savepoint);
  out.poll();
  return out;
}

int async_publish::socket() const noexcept {
  return impl_->conn.socket();
}

bool async_publish::wants_write() const noexcept {
  return impl_->flushing;
}

bool async_publish::poll() {
  return impl_->advance();
}

bool async_publish::finished() const noexcept {
  return impl_->finished;
}

std::vector<message> async_publish::result() {
  if (!impl_->finished)
    throw error(errc::invalid_argument, "async_publish::result called before it finished");
  if (impl_->failure)
    std::rethrow_exception(impl_->failure);
  return std::move(impl_->published);
}

void async_publish::cancel() {
  if (impl_->finished || impl_->cancel_requested)
    return;
  impl_->cancel_requested = true;
  impl_->conn.cancel();
}

} // namespace troupe
