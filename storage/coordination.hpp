// Rate limiters, per-key concurrency and barriers in the area's coordination tables
// (migration 7; docs/coordination.md). Each call is one statement in autocommit.
#pragma once

#include "storage/connection.hpp"
#include "storage/statements.hpp"
#include "troupe/error.hpp"

#include <cstdint>
#include <optional>
#include <string>

namespace troupe::storage {

/// The first schema version with coordination.
inline constexpr int coordination_version = 7;

/// One limiter as the functions of migration 7 see it.
struct limiter_key {
  /// '' for a named limiter; a task's name for its per-key concurrency.
  std::string scope;
  std::string name;
  /// concurrent, bucket or window.
  std::string kind;
  std::int32_t capacity = 1;
  std::int64_t window_ms = 0;
};

/// The refusal of limiters and barriers on an area at `version` (below coordination_version),
/// naming the upgrade.
error coordination_missing(int version);

/// Takes a slot of `l` for `holder` (a concurrent slot until `ttl_ms` from now; node_id 0:
/// outside a node, the slot lives until its TTL or its release). Whether it holds one. Throws
/// troupe::error(invalid_argument) naming the limiter when it is of another kind.
bool limit_acquire(connection& conn, const statement_set& stmts, const limiter_key& l,
                   const std::string& holder, std::int32_t node_id, std::int64_t ttl_ms);
/// Lets `holder`'s slot of `l` go; whether it held one.
bool limit_release(connection& conn, const statement_set& stmts, const limiter_key& l,
                   const std::string& holder);
/// How much of `l` is taken now: live slots (concurrent, window) or the current window's
/// use (bucket).
std::int64_t limit_in_use(connection& conn, const statement_set& stmts, const limiter_key& l);

/// Creates barrier `name` for `parties`, live for `ttl_ms`: true when it created it, false
/// when a live barrier with that party count exists. Throws troupe::error(invalid_argument)
/// naming the barrier when it exists with another count.
bool barrier_create(connection& conn, const statement_set& stmts, const std::string& name,
                    std::int32_t parties, std::int64_t ttl_ms);
/// One party arrives: whether the barrier is released. Throws troupe::error(not_found) when no
/// live barrier has the name.
bool barrier_arrive(connection& conn, const statement_set& stmts, const std::string& name);
/// Whether barrier `name` is released; none when no live barrier has the name.
std::optional<bool> barrier_released(connection& conn, const statement_set& stmts,
                                     const std::string& name);
/// LISTENs on the area's coordination channel (barrier releases).
void listen_for_barriers(connection& conn, const statement_set& stmts);

/// The janitor's pass over the coordination tables (see purge_coordination in
/// storage/sql/coordination.sql). Returns the rows deleted.
std::int64_t purge_coordination(connection& conn, const statement_set& stmts, std::int64_t idle_ms);

} // namespace troupe::storage
