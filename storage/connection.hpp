// One PostgreSQL connection (RAII over PGconn) with statements prepared lazily by name, and the
// mapping of libpq failures onto Troupe's error taxonomy. Not thread-safe: one owner at a time
// (a storage actor, a listener, or a client behind its mutex).
#pragma once

#include "storage/statements.hpp"

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

struct pg_conn;
struct pg_result;

namespace troupe::storage {

/// The owned result of one statement.
class result {
public:
  result() = default;
  explicit result(pg_result* res) : res_(res) {}

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
};

/// Text parameters for a statement; std::nullopt binds SQL NULL.
using params = std::vector<std::optional<std::string>>;

/// A PostgreSQL text array literal ("{...}") holding `items`, each quoted and escaped.
std::string array_literal(const std::vector<std::string>& items);
/// The same for optional items: std::nullopt becomes NULL.
std::string array_literal(const std::vector<std::optional<std::string>>& items);
/// Parses a one-dimensional text array literal as PostgreSQL prints it.
std::vector<std::string> parse_array_literal(std::string_view text);

/// `dsn` as libpq parses it, with any password replaced by "***", for logs and errors; a DSN
/// libpq cannot parse is not echoed.
std::string redact_dsn(std::string_view dsn);
/// Any text (an argument, a message) with what looks like a password in it replaced by "***":
/// `password=...` (quoted or not) and the password of a `scheme://user:password@host` URI.
std::string redact_secrets(std::string_view text);

/// An open connection. Statements run through run() are prepared on first use under their name.
class connection {
public:
  /// Opens a connection; throws troupe::error: invalid_argument for a DSN libpq cannot parse,
  /// connection_lost naming the (redacted) target when the server cannot be reached.
  static connection open(const std::string& dsn, std::string_view application_name);

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
  /// Runs the named statement `st` between the plain SQL `before` and `after` (each one statement
  /// or empty, such as "BEGIN" and "COMMIT"), sent together in one round trip (libpq's pipeline
  /// mode). The server skips what follows a failed statement. Returns the result of `st`; throws
  /// troupe::error when any of them failed.
  result run_between(const statement& st, const params& values, std::string_view before,
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

  /// The backend's process id (for tests that terminate it).
  int backend_pid() const noexcept;

private:
  explicit connection(pg_conn* conn);
  void prepare(const statement& st);
  struct deleter {
    void operator()(pg_conn* c) const noexcept;
  };
  std::unique_ptr<pg_conn, deleter> conn_;
  std::unordered_map<std::string, std::string> prepared_; // name -> text prepared under it
};

/// Turns a failed result (or a broken connection) into troupe::error and throws it. `label`
/// names the statement.
[[noreturn]] void throw_error(pg_conn* conn, pg_result* res, std::string_view label);

} // namespace troupe::storage
