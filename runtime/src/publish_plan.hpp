// How one publishing call runs, as a sequence of SQL steps that any driver can execute: the
// client and the storage actor on their own connections, the transactional functions on the
// caller's connection, blocking or not. The plan validates, applies the options, runs the
// enqueue hooks at the right moment, claims deduplication keys, and assembles the results in
// input order. It never touches a connection itself.
#pragma once

#include "storage/borrowed_connection.hpp"
#include "storage/records.hpp"
#include "storage/statements.hpp"
#include "troupe/enqueue_options.hpp"
#include "troupe/message.hpp"
#include "troupe/middleware.hpp"

#include <optional>
#include <vector>

namespace troupe::detail {

/// One statement to run: a named statement of the area and its parameters.
struct publish_step {
  const storage::statement* statement = nullptr;
  storage::params values;
};

class publish_plan {
public:
  /// Validates everything (throws troupe::error(invalid_argument) before any SQL). Without
  /// deduplication the before_enqueue hooks run here; with it, they run once the keys are
  /// claimed, and only for the messages that will be published.
  publish_plan(storage::statement_set_ptr stmts, std::vector<message> batch,
               std::vector<enqueue_options> options, const std::vector<middleware_ptr>& hooks,
               bool revive);

  /// Whether the plan takes more than one statement, so that it needs a transaction (or a
  /// savepoint on a caller's transaction) to be all or nothing.
  bool multi_step() const noexcept { return deduplicating_; }
  /// The area's statements.
  const storage::statement_set& statements() const noexcept { return *stmts_; }
  /// Whether there is nothing to run at all (an empty batch).
  bool empty() const noexcept { return batch_.empty(); }

  /// The next statement, or none when the plan is complete.
  std::optional<publish_step> next();
  /// The result of the statement next() returned last.
  void accept(const storage::result& res);
  /// When the plan is one plain insert of at least `bulk_threshold` messages without a delay,
  /// its rows, for a driver that writes them another way (a binary COPY); null otherwise.
  const std::vector<message>* bulk_rows() const;
  /// The rows bulk_rows() gave were written: the plan is complete.
  void accept_bulk();

  /// Starts over after a failed attempt that was rolled back or lost (a reconnect): hooks that
  /// ran stay run. `revive` as for the constructor (false on a retry of a lost reply).
  void restart(bool revive);

  /// Runs the after_enqueue hooks of the published messages (input order) and returns every
  /// message in input order: as published, or the message holding its deduplication key.
  /// `rethrow_hooks`: whether an after_enqueue exception propagates (transactional calls) or
  /// is logged (committed publishes, which must not look failed).
  std::vector<message> finish(bool rethrow_hooks);

private:
  enum class phase { claim, enqueue, store, done };

  void run_before_hooks();

  storage::statement_set_ptr stmts_;
  std::vector<message> batch_;
  std::vector<enqueue_options> options_;
  std::vector<middleware_ptr> hooks_;
  bool revive_;
  bool deduplicating_ = false;
  std::int64_t token_ = 0;
  phase phase_ = phase::enqueue;

  // Per entry: whether it is published by this call, its before hooks ran, and for duplicates
  // where its result comes from: another entry of the batch (index) or a stored message.
  std::vector<bool> publish_;
  std::vector<bool> hooked_;
  std::vector<std::optional<std::size_t>> same_as_;
  std::vector<std::optional<message>> holder_;
  // The key claims of this call (first entry of each distinct key) and the entries they
  // belong to.
  std::vector<storage::key_claim> claims_;
  std::vector<std::size_t> claim_entry_;
  // The claims to store again with the message as published (hooks changed it), if any.
  std::vector<storage::key_claim> restored_;
};

/// The smallest batch written with a binary COPY on Troupe's own connections: below it, the
/// COPY's extra round trips (a transaction around it) cost more than the text arrays it saves.
inline constexpr std::size_t bulk_threshold = 32;

/// The message envelope as JSON, as stored with a deduplication key.
std::string message_json(const message& m);

/// Runs `plan` on a connection of Troupe's own: one statement in autocommit, or a transaction
/// when the plan takes several.
void run_on_own_connection(storage::connection& conn, publish_plan& plan);

/// Refuses (before any SQL) a caller's connection that is missing or not inside a transaction.
void require_transaction(const storage::borrowed_connection& conn, std::string_view what);

/// The area's statements (validated, rendered once per area and thread, shared).
storage::statement_set_ptr statements_for(const area& where);

} // namespace troupe::detail
