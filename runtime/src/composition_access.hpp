// What compositions and coordination read and check through a client or a caller's
// connection: the area's version (groups need migration 6) and a group's row, and the client's
// connection. Internal to Troupe.
#pragma once

#include "troupe/area.hpp"
#include "troupe/client.hpp"
#include "troupe/composition.hpp"
#include "troupe/error.hpp"

#include "storage/connection.hpp"
#include "storage/statements.hpp"

#include <functional>
#include <string>

struct pg_conn;

namespace troupe::detail {

/// The first schema version with groups.
inline constexpr int groups_version = 6;

struct client_access {
  static group_status read_group(client& c, const std::string& canonical_id);
  static int area_version(client& c);
  /// Runs `f(connection, statements, first_try)` on the client's connection (see
  /// storage::shared_connection::with: reopened and run again once after a lost connection).
  static void with_connection(
    client& c,
    const std::function<void(storage::connection&, const storage::statement_set&, bool)>& f);
  /// A connection of the caller's own to the client's database, following the area's version
  /// (for waits that must not hold the client's).
  static storage::connection open_own(client& c);
  static storage::statement_set_ptr statements(client& c);
};

/// The refusal of groups on an area at `version` (below groups_version).
error groups_missing(int version);

/// Throws troupe::error(invalid_argument) when the area that `c` (or `conn`, inside the
/// caller's transaction) publishes into has no groups yet (below migration 6).
void require_groups(client& c);
void require_groups(pg_conn* conn, const area& where);

} // namespace troupe::detail
