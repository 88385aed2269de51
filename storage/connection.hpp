// One PostgreSQL connection (RAII over PGconn) with statements prepared lazily by name, LISTEN
// and the wait for notifications, and the mapping of libpq failures onto Troupe's error
// taxonomy. Not thread-safe: one owner at a time (a storage actor, a listener, a result
// waiter, or a client behind its mutex). Storage is the only code that calls libpq; everything
// else goes through this class, borrowed_connection.hpp or the typed calls of queries.hpp.
#pragma once

#include "storage/statements.hpp"

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

struct pg_conn;
struct pg_result;

namespace troupe::storage {

class result;
namespace detail {
result checked(pg_conn* conn, pg_result* res, std::string_view label);
} // namespace detail

/// The owned result of one statement.
class result {
public:
  result() = default;
  explicit result(pg_result* res) : res_(res) {}

  /// Whether the statement succeeded (a result with or without rows).
  bool ok() const noexcept;
  int rows() const noexcept;
  bool is_null(int row, int col) const noexcept;
  std::string_view text(int row, int col) const noexcept;
  std::int64_t int64(int row, int col) const;
  double float8(int row, int col) const;
  /// Rows affected by an INSERT/UPDATE/DELETE.
  std::int64_t affected() const;

private:
  struct deleter {
    void operator()(pg_result* r) const noexcept;
  };
  std::unique_ptr<pg_result, deleter> res_;
  friend class connection;
  friend class borrowed_connection;
  friend result detail::checked(pg_conn*, pg_result*, std::string_view);
  pg_result* native() const noexcept { return res_.get(); }
};

/// Text parameters for a statement; std::nullopt binds SQL NULL.
using params = std::vector<std::optional<std::string>>;

/// A PostgreSQL text array literal ("{...}") holding `items`, each quoted and escaped.
std::string array_literal(const std::vector<std::string>& items);
/// The same for optional items: std::nullopt becomes NULL.
std::string array_literal(const std::vector<std::optional<std::string>>& items);
/// Parses a one-dimensional text array literal as PostgreSQL prints it.
std::vector<std::string> parse_array_literal(std::string_view text);

/// A notification received on a channel the connection LISTENs on.
struct notification {
  std::string channel;
  std::string payload;
  /// The backend process that sent it.
  int sender_pid = 0;
};

/// An open connection. Statements run through run() are prepared on first use under their name.
class connection {
public:
  /// Opens a connection; throws troupe::error: invalid_argument for a DSN libpq cannot parse
  /// (troupe::validate_dsn), connection_lost naming the (redacted) target when the server
  /// cannot be reached. The server's notices go to the log at debug level. A positive
  /// `statement_timeout` is SET as the session's statement_timeout; zero leaves the server's.
  static connection open(const std::string& dsn, std::string_view application_name,
                         std::chrono::milliseconds statement_timeout = {});

  connection(connection&&) noexcept;
  connection& operator=(connection&&) noexcept;
  ~connection();

  /// Whether libpq still considers the connection usable.
  bool ok() const noexcept;
  pg_conn* native() const noexcept { return conn_.get(); }

  /// Runs SQL text with no parameters (may hold several statements). Throws troupe::error.
  result exec(std::string_view sql, std::string_view label = "exec");
  /// Runs SQL text with parameters, unprepared. Throws troupe::error.
  result exec_params(std::string_view sql, const params& values, std::string_view label);
  /// Runs a named statement, preparing it on this connection the first time (and again when a
  /// statement of the same name but another area's text comes along). Throws troupe::error.
  result run(const statement& st, const params& values);
  /// Runs the named statement `st` between the plain SQL statements `before` (in order) and
  /// `after` (one statement or empty), such as "BEGIN" and "COMMIT", sent together in one round
  /// trip (libpq's pipeline mode). The server skips what follows a failed statement. Returns the
  /// result of `st`; throws troupe::error when any of them failed.
  result run_between(const statement& st, const params& values,
                     std::initializer_list<std::string_view> before, std::string_view after);
  /// run_between for two named statements sent one after the other: both results.
  std::pair<result, result> run_two_between(const statement& first, const params& first_values,
                                            const statement& second, const params& second_values,
                                            std::initializer_list<std::string_view> before,
                                            std::string_view after);
  /// Runs a `COPY ... FROM STDIN` statement once per part of `parts` (each a whole input in the
  /// format the statement names), after the plain SQL `before` and followed by the plain SQL
  /// `after` when given, all sent as one query ("before COPY; COPY; ...after"): "BEGIN; " before
  /// and "; COMMIT" after make them one transaction. The server skips what follows a failed
  /// statement. Returns the rows all the COPYs wrote; throws troupe::error when any of the
  /// statements failed. The connection is ready for the next statement either way.
  std::int64_t copy_in_parts(const statement& st, const std::vector<std::string>& parts,
                             std::string_view before = {}, std::string_view after = {});
  /// `text` as an SQL string literal for this connection. Throws troupe::error.
  std::string literal(std::string_view text) const;

  /// BEGIN and COMMIT (throw troupe::error), and a ROLLBACK that never throws: for the clean-up
  /// after a failure, whose own error is the one to report. Does nothing on a broken
  /// connection.
  void begin(std::string_view label);
  void commit(std::string_view label);
  void rollback_quietly() noexcept;

  /// LISTENs on `channel` (quoted here). Throws troupe::error.
  void listen(std::string_view channel);
  /// Waits up to `timeout` for notifications on the channels this connection LISTENs on and
  /// returns those that arrived (none when the time ran out; a zero timeout only collects what
  /// is already there). Throws troupe::error(connection_lost) when the connection broke.
  std::vector<notification> wait_for_notifications(std::chrono::milliseconds timeout);

  /// Server warnings (not notices, which go to the log at debug level) go to `receiver` from
  /// now on, with their primary text.
  void on_warning(std::function<void(std::string_view)> receiver);

  /// The server's version as libpq reports it (150004 for 15.4).
  int server_version() const noexcept;
  /// The backend's process id (for tests that terminate it).
  int backend_pid() const noexcept;

private:
  struct notices; // where the server's notices go; owned here, its address stable
  explicit connection(pg_conn* conn);
  std::vector<result>
  run_pipelined(std::initializer_list<std::pair<const statement*, const params*>> statements,
                std::initializer_list<std::string_view> before, std::string_view after);
  void prepare(const statement& st);
  struct deleter {
    void operator()(pg_conn* c) const noexcept;
  };
  std::unique_ptr<notices> notices_; // outlives conn_: PQfinish may still report a notice
  std::unique_ptr<pg_conn, deleter> conn_;
  std::unordered_map<std::string, std::string> prepared_; // name -> text prepared under it
};

/// Turns a failed result (or a broken connection) into troupe::error and throws it. `label`
/// names the statement.
[[noreturn]] void throw_error(pg_conn* conn, pg_result* res, std::string_view label);

} // namespace troupe::storage
