// Numbered, idempotent migrations of an area, recorded in its versions table. Used by
// `troupe init` / `troupe upgrade`, and printed as SQL text by `troupe sql`.
#pragma once

#include "storage/connection.hpp"

#include <string>
#include <vector>

namespace troupe::storage {

/// The number of the newest migration built into this binary.
int latest_migration();

/// The highest migration applied to the area, 0 when the area is not initialized.
int current_version(connection& conn, const statement_set& stmts);

/// Makes `stmts` run the statements of the area's version (a reader of results on an area
/// that lacks the newest migrations): the oldest version there are statements for when the
/// area is older, the latest when it is not initialized.
void follow_area_version(connection& conn, const statement_set& stmts);

/// Applies every migration above the area's current version, each in its own transaction under
/// an advisory lock (concurrent migrators wait, then find nothing left to do). Returns the
/// numbers applied, in order; empty when the area was up to date.
std::vector<int> migrate(connection& conn, const statement_set& stmts);

/// The SQL a user can run themselves: migrations after `from_version` (0 = everything), each
/// recorded in the versions table, in one transaction.
std::string migration_script(const area& a, int from_version = 0);

} // namespace troupe::storage
