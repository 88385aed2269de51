// What compositions read and check through a client or a caller's connection: the area's
// version (groups need migration 6) and a group's row. Internal to Troupe.
#pragma once

#include "troupe/area.hpp"
#include "troupe/client.hpp"
#include "troupe/composition.hpp"
#include "troupe/error.hpp"

#include <string>

struct pg_conn;

namespace troupe::detail {

/// The first schema version with groups.
inline constexpr int groups_version = 6;

struct client_access {
  static group_status read_group(client& c, const std::string& canonical_id);
  static int area_version(client& c);
};

/// The refusal of groups on an area at `version` (below groups_version).
error groups_missing(int version);

/// Throws troupe::error(invalid_argument) when the area that `c` (or `conn`, inside the
/// caller's transaction) publishes into has no groups yet (below migration 6).
void require_groups(client& c);
void require_groups(pg_conn* conn, const area& where);

} // namespace troupe::detail
