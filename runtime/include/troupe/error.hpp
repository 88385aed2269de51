// Troupe's error taxonomy: every failure that crosses a module boundary carries one of these
// codes, a text that names what was wrong, and (for database errors) the SQLSTATE.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>

namespace troupe {

/// What kind of failure happened; decides what the caller can do about it.
enum class errc : std::uint8_t {
  /// The database connection is gone or could not be opened; retry after reconnecting.
  connection_lost = 1,
  /// A transient database condition (serialization failure, deadlock, lock timeout).
  retryable,
  /// A unique, foreign-key or check constraint refused the write.
  constraint_violated,
  /// A statement failed in a way that points at a bug or a missing migration.
  bug,
  /// A caller passed a value that breaks a documented rule (names, options, config).
  invalid_argument,
  /// No task of that name is registered on this node.
  unknown_task,
  /// A message's arguments or result do not decode into the task's types.
  decode_failed,
  /// The caller's connection is not inside a transaction when one is required.
  not_in_transaction,
  /// A wait ran out of time.
  timeout,
  /// The thing asked for does not exist.
  not_found,
  /// The component is shutting down and takes no new work.
  shutting_down,
  /// A message's task failed for good (result_error holds the failure's type and text).
  task_failed,
  /// A middleware skipped the message (age limit), so there is no result.
  task_skipped,
  /// The message was cancelled, so there is no result.
  task_cancelled,
  /// The caller cancelled the operation (an asynchronous publish) before it finished.
  cancelled,
};

/// The stable name of a code, as it appears in logs, JSON and error records.
std::string_view to_string(errc code) noexcept;

/// The exception Troupe's plain C++ API throws. Actors reply with the same code instead.
class error : public std::runtime_error {
public:
  error(errc code, const std::string& what, std::string sqlstate = {})
      : std::runtime_error(what), code_(code), sqlstate_(std::move(sqlstate)) {}

  errc code() const noexcept { return code_; }

  /// The five-character SQLSTATE for database errors, empty otherwise.
  const std::string& sqlstate() const noexcept { return sqlstate_; }

private:
  errc code_;
  std::string sqlstate_;
};

} // namespace troupe
