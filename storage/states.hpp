// The state record's queries (admin::get_state, get_states, get_states_count): one statement
// per page or count, built from a whitelist of columns, statuses and filters (never from the
// caller's text, which travels as parameters). Each reads the live rows (queued, running) and
// the finished ones (done, failed, cancelled) in two branches, so that the finished branch
// reads through the partial indexes on finished rows and its cost follows the rows it returns,
// not the history the area keeps. Needs an area at migration 5 (progress, cancel_requested).
#pragma once

#include "storage/connection.hpp"
#include "troupe/area.hpp"
#include "troupe/state_records.hpp"

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace troupe::storage {

/// The six statuses, and the columns a page may sort on, in the order the docs list them.
const std::vector<std::string_view>& state_statuses();
const std::vector<std::string_view>& state_sort_columns();

/// A statement and its parameters.
struct built_query {
  std::string sql;
  params values;
};

/// The statement of one page of `q` (limit + 1 rows, so the caller knows whether more
/// follow), for area `a`. `q` is validated already, its cursor included (invalid_argument for
/// a cursor that does not decode or was made for another sort).
built_query states_page_query(const area& a, const state_query& q);
/// The statement counting what `f` matches.
built_query states_count_query(const area& a, const state_filter& f);

/// Runs them: each in a read-only transaction whose time zone is UTC (a bound without a zone
/// is UTC). A bound PostgreSQL cannot read as a time is invalid_argument, naming the bound.
state_page read_states(connection& conn, const area& a, const state_query& q);
std::int64_t count_states(connection& conn, const area& a, const state_filter& f);
std::optional<message_state> state_by_id(connection& conn, const area& a, const std::string& id,
                                         bool payload);

} // namespace troupe::storage
