// The counts of finished rows per queue and state that `troupe stats` reads (migration 5 on).
// Internal to Troupe.
#pragma once

#include "storage/connection.hpp"

#include <chrono>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace troupe::storage {

class statement_set;

/// Adds the pending changes to the counts (a janitor pass); returns how many it added.
std::int64_t fold_state_counts(connection& conn, const statement_set& stmts);

/// Rebuilds the counts from the rows, in one transaction that holds off every statement that
/// would change them meanwhile (for as long as the count takes). timeout when a transaction
/// that changes counts stays open past `lock_wait`. Returns how many (queue, state) counts
/// there are.
std::int64_t recount_states(connection& conn, const statement_set& stmts,
                            std::chrono::milliseconds lock_wait);

/// Per queue (queues without any are left out): messages that failed for good within the last
/// `window` (migration 5 on).
std::vector<std::pair<std::string, std::int64_t>>
failed_recently(connection& conn, const statement_set& stmts, std::chrono::seconds window);

} // namespace troupe::storage
