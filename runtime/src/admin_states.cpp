// The admin API's state queries (troupe/admin.hpp: get_state, get_states, get_states_count):
// the caller's filter and page checked here, the statements built and run in storage/states.
#include "runtime/src/admin_impl.hpp"
#include "storage/states.hpp"
#include "troupe/admin.hpp"
#include "troupe/area.hpp"
#include "troupe/limits.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace troupe {

namespace {

std::string joined(const std::vector<std::string_view>& names) {
  return fmt::format("{}", fmt::join(names, ", "));
}

state_filter checked_filter(const state_filter& given) {
  state_filter f = given;
  const auto& statuses = storage::state_statuses();
  for (const auto& s : f.statuses)
    if (std::find(statuses.begin(), statuses.end(), s) == statuses.end())
      throw error(errc::invalid_argument,
                  "status \"" + s.substr(0, 100) + "\" is not one of " + joined(statuses));
  for (const auto& t : f.tasks)
    if (t.empty() || t.size() > limits::max_task_name)
      throw error(errc::invalid_argument,
                  fmt::format("task name filter \"{}\" must be 1 to {} bytes", t.substr(0, 100),
                              limits::max_task_name));
  for (const auto& q : f.queues)
    validate_queue_name(q);
  for (auto& id : f.message_ids)
    id = message_id(id);
  for (auto& id : f.composition_ids)
    id = message_id(id, "composition id");
  return f;
}

} // namespace

std::optional<message_state> admin::get_state(const std::string& given, bool payload) {
  auto id = message_id(given);
  return impl_->with_connection([&](storage::connection& c) {
    impl_->require_operations(c, "reading the state record");
    return storage::state_by_id(c, impl_->stmts->where(), id, payload);
  });
}

state_page admin::get_states(const state_query& query) {
  if (query.limit < 1 || query.limit > 1000)
    throw error(errc::invalid_argument,
                "limit " + std::to_string(query.limit) + " is not between 1 and 1000");
  if (query.offset < 0)
    throw error(errc::invalid_argument, "offset " + std::to_string(query.offset) + " is negative");
  if (query.offset > 0 && query.after)
    throw error(errc::invalid_argument, "a page takes a cursor (after) or an offset, not both");
  const auto& columns = storage::state_sort_columns();
  if (std::find(columns.begin(), columns.end(), query.sort.column) == columns.end())
    throw error(errc::invalid_argument, "cannot sort on \"" + query.sort.column.substr(0, 100) +
                                          "\": the sort column is one of " + joined(columns));
  auto q = query;
  q.filter = checked_filter(query.filter);
  // The cursor is checked as the statement is built, before any connection.
  storage::states_page_query(impl_->stmts->where(), q);
  return impl_->with_connection([&](storage::connection& c) {
    impl_->require_operations(c, "reading states");
    return storage::read_states(c, impl_->stmts->where(), q);
  });
}

std::int64_t admin::get_states_count(const state_filter& filter) {
  auto f = checked_filter(filter);
  return impl_->with_connection([&](storage::connection& c) {
    impl_->require_operations(c, "counting states");
    return storage::count_states(c, impl_->stmts->where(), f);
  });
}

} // namespace troupe
