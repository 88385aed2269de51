// A caller's own libpq connection, borrowed for one publish inside the caller's transaction.
#pragma once

#include "storage/connection.hpp"

#include <optional>
#include <string_view>

namespace troupe::storage {

/// A caller's own libpq connection, borrowed for one publish inside the caller's transaction
/// (transactional and asynchronous publishing). Troupe never begins, commits, rolls back or
/// closes it, and never prepares a statement on it: statements run unprepared, so none of
/// Troupe's is left behind. The caller keeps ownership.
class borrowed_connection {
public:
  explicit borrowed_connection(pg_conn* conn) noexcept : conn_(conn) {}

  pg_conn* native() const noexcept { return conn_; }
  /// Whether the connection is inside a transaction block (and not in a failed one).
  bool in_transaction() const noexcept;
  /// Whether the connection is in non-blocking mode (PQsetnonblocking).
  bool nonblocking() const noexcept;
  /// Whether results of a statement sent earlier are still to be read.
  bool busy() const noexcept;

  // Blocking: each runs one statement and throws troupe::error when it fails.

  /// Runs `st` unprepared.
  result run(const statement& st, const params& values);
  /// SAVEPOINT, and its RELEASE and ROLLBACK TO (the last two never throw: they clean up).
  void savepoint();
  void release_savepoint() noexcept;
  void rollback_to_savepoint() noexcept;

  // Non-blocking: send one statement, flush it, then read its results as the socket allows.

  /// What a savepoint step sends.
  enum class savepoint_step { begin, release, rollback };
  /// Queues `st` (unprepared) or a savepoint step. Throws troupe::error when libpq cannot.
  void send(const statement& st, const params& values);
  void send(savepoint_step step);
  /// Writes what is queued; true once everything is sent. Throws when the connection broke.
  bool flush();
  /// Reads what the socket holds. Throws when the connection broke.
  void consume_input();
  /// Whether the next result can be read without blocking.
  bool result_ready() const noexcept;
  /// The next result of the statement sent last; none once its results are all read.
  std::optional<result> next_result();
  /// Throws the troupe::error `res` (a failed result) stands for; `label` names the statement.
  [[noreturn]] void raise(const result& res, std::string_view label) const;
  /// The socket to wait on.
  int socket() const noexcept;
  /// Asks the server to cancel the statement in flight (best effort, never throws).
  void cancel() noexcept;

private:
  pg_conn* conn_;
};

} // namespace troupe::storage
