// The producer side for plain C++ code: publish messages without a worker node or an actor
// system. Thread-safe; holds one connection, opened on first use and reopened after a loss.
#pragma once

#include "troupe/area.hpp"
#include "troupe/enqueue_options.hpp"
#include "troupe/message.hpp"
#include "troupe/middleware.hpp"

#include "troupe/error.hpp"
#include "troupe/json.hpp"

#include <chrono>
#include <memory>
#include <string>
#include <vector>

namespace troupe {

/// How long get_result waits by default when asked to block.
inline constexpr std::chrono::milliseconds default_result_timeout{10000};

/// Why a result cannot be had. code(): not_found (missing: no such message, not finished yet
/// and not blocking, or finished without a stored result), timeout, task_failed (with the
/// failure's type and text), task_skipped (age limit), task_cancelled.
class result_error : public error {
public:
  result_error(errc code, const std::string& what, std::string failure_type = {},
               std::string failure_text = {})
      : error(code, what), failure_type_(std::move(failure_type)),
        failure_text_(std::move(failure_text)) {}
  const std::string& failure_type() const noexcept { return failure_type_; }
  const std::string& failure_text() const noexcept { return failure_text_; }

private:
  std::string failure_type_;
  std::string failure_text_;
};

namespace detail {
struct client_access; // Troupe's own reads through a client (groups)
} // namespace detail

/// Where a client publishes.
struct client_options {
  /// libpq connection string or URI; empty means libpq's PG* environment variables.
  std::string dsn;
  troupe::area area;
  std::string application_name = "troupe-client";
  /// Middleware whose before_enqueue / after_enqueue hooks run around every publish (before
  /// in order, after in reverse order, after_enqueue once the statement has committed).
  std::vector<middleware_ptr> middleware;
};

/// Publishes messages into an area.
class client {
public:
  /// Throws troupe::error(invalid_argument) for an invalid area or a DSN libpq cannot parse
  /// (troupe/dsn.hpp); connects on first use.
  explicit client(client_options options);
  ~client();
  client(const client&) = delete;
  client& operator=(const client&) = delete;

  /// Publishes one message (one statement, one NOTIFY at commit) and returns it as stored; with
  /// a deduplication key that is live, returns the message holding it and publishes nothing.
  /// Throws troupe::error: invalid_argument for a bad queue name or bad options (before any
  /// SQL), connection_lost and others from the database.
  message enqueue(message m, const enqueue_options& options = {});

  /// Publishes up to max_batch_size (1,000) messages atomically: all or none. `options` is
  /// empty or holds one entry per message. Without deduplication keys the batch is one
  /// transaction: an INSERT, or a binary COPY for 32 messages or more without a delay; with
  /// keys, one transaction of two or three statements. Returns every message in input
  /// order: as published, or (for a duplicate key) the message holding the key. An empty batch
  /// runs no SQL.
  std::vector<message> enqueue_many(std::vector<message> batch,
                                    std::vector<enqueue_options> options = {});

  /// The stored result of message `id` as JSON text. Without `block`, a message that has not
  /// finished is missing; with it, the call waits up to `timeout`, woken by the notification
  /// of the completion that writes the result and polling once a second as a fallback. Throws
  /// result_error (see there). Blocks the calling thread: inside an actor, use a
  /// result waiter instead (<troupe/caf.hpp>).
  std::string get_result_json(const std::string& id, bool block = false,
                              std::chrono::milliseconds timeout = default_result_timeout);

  /// The stored result of `m`, decoded as `T`.
  template <class T>
  T get_result(const message& m, bool block = false,
               std::chrono::milliseconds timeout = default_result_timeout) {
    return decode_value<T>(get_result_json(m.id, block, timeout));
  }

private:
  friend struct detail::client_access;
  struct impl;
  std::unique_ptr<impl> impl_;
};

} // namespace troupe
