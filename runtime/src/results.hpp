// Reading a finished message's result: shared by client::get_result_json and the result waiter
// actor, so both give the same answer for the same row. Internal to Troupe.
#pragma once

#include "storage/records.hpp"

#include <string>

namespace troupe::detail {

/// The result JSON of a finished message, or the result_error (troupe/client.hpp) it stands
/// for: not_found (done without a stored result, or one past its result_ttl), task_cancelled,
/// task_skipped, task_failed.
std::string result_of(const storage::finished_message& m);

} // namespace troupe::detail
