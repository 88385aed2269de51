// Publishing inside the caller's transaction without blocking: for callers that drive their
// libpq connection in non-blocking mode from an event loop. The publish sends its statements
// and reads their results only when the socket is ready; the caller waits on socket() and calls
// poll() whenever it is readable (or writable, while wants_write()). Inside a CAF actor, use
// the async publisher of <troupe/caf.hpp>, which does this on its own thread and replies.
//
//   PQsetnonblocking(conn, 1);  ... BEGIN, business writes ...
//   auto publish = troupe::async_publish::many(conn, area, std::move(batch), std::move(opts));
//   while (!publish.poll())
//     wait_for(publish.socket(), publish.wants_write());   // the event loop's own wait
//   auto published = publish.result();                     // throws what the publish met
//   ... COMMIT (or ROLLBACK)
#pragma once

#include "troupe/area.hpp"
#include "troupe/enqueue_options.hpp"
#include "troupe/message.hpp"
#include "troupe/middleware.hpp"

#include <memory>
#include <vector>

struct pg_conn; // libpq's PGconn

namespace troupe {

/// One publish in progress on a caller's non-blocking connection. The same rules as
/// enqueue_in_transaction / enqueue_many_in_transaction: the connection must be in non-blocking
/// mode (PQsetnonblocking) and inside a transaction, with no statement of its own in flight, or
/// the start is refused (invalid_argument, not_in_transaction) before any SQL. Batches and
/// deduplicated publishes run in a savepoint, which a failure or a cancellation rolls back,
/// leaving the caller's transaction usable; a failed single plain publish leaves it aborted,
/// and the caller must roll back. The enqueue hooks run synchronously inside poll(). Until
/// finished(), the caller must not use the connection; destroying an unfinished publish
/// cancels it and waits for the connection to settle.
class async_publish {
public:
  /// Starts publishing one message.
  static async_publish single(pg_conn* conn, const area& where, message m,
                              const enqueue_options& options = {},
                              std::vector<middleware_ptr> middleware = {});
  /// Starts publishing a batch (at most 1,000 messages; `options` empty or one per message).
  static async_publish many(pg_conn* conn, const area& where, std::vector<message> batch,
                            std::vector<enqueue_options> options = {},
                            std::vector<middleware_ptr> middleware = {});

  async_publish(async_publish&&) noexcept;
  async_publish& operator=(async_publish&&) noexcept;
  ~async_publish();

  /// The connection's socket, to wait on.
  int socket() const noexcept;
  /// Whether to wait for the socket to become writable too (a statement not fully sent).
  bool wants_write() const noexcept;
  /// Does all the work possible without blocking; returns finished().
  bool poll();
  bool finished() const noexcept;
  /// The published messages in input order (a duplicate's place holds the message holding
  /// its key). Throws what the publish met: troupe::error, with errc::cancelled after cancel().
  /// Only once finished().
  std::vector<message> result();
  /// Asks the server to cancel the statement in flight. The publish then finishes with
  /// errc::cancelled (unless it had already completed), after rolling back its savepoint.
  void cancel();

private:
  struct impl;
  explicit async_publish(std::unique_ptr<impl> p);
  std::unique_ptr<impl> impl_;
};

} // namespace troupe
