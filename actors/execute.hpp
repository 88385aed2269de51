// Running one attempt of a claimed message: find the task, decode its arguments, call it, and
// turn whatever happens into an outcome. No exception ever leaves; no CAF here.
#pragma once

#include "storage/records.hpp"
#include "troupe/task.hpp"

#include <string>
#include <string_view>

namespace troupe::actors {

/// The longest failure text kept in a failure record.
inline constexpr std::size_t max_failure_text = 2000;

/// A failure record as stored with the message: {"type", "text" (at most 2,000 characters),
/// "time" (UTC, ISO 8601), "attempt"}.
std::string failure_record(std::string_view type, std::string_view text, std::int32_t attempt);

/// Runs `msg` with the tasks of `registry`. Unknown tasks and undecodable arguments become
/// failed outcomes whose record names the reason; a task's exception becomes a failed outcome
/// with the exception's type and text.
storage::outcome execute(const task_registry& registry, const storage::claimed_message& msg,
                         const std::string& queue);

} // namespace troupe::actors
