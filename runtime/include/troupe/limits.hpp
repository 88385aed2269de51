// The bounds Troupe puts on what enters it: message sizes, names and the durations of message
// options. Publishing refuses a message outside them (troupe::error(invalid_argument) naming
// the field and its range); a row written into the queue by other means fails its attempt with
// a failure record that says the same. docs/operations.md lists them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace troupe::limits {

/// Longest task name, in bytes (the queue table refuses longer ones too).
inline constexpr std::size_t max_task_name = 255;
/// Largest message: its arguments and options together, as JSON text. Each message a node
/// holds (running or prefetched) takes about this much memory at most, plus the task's own.
inline constexpr std::size_t max_message_bytes = 64u << 20;
/// Longest delay of a publish: ten years, in milliseconds.
inline constexpr std::int64_t max_delay_ms = 10LL * 365 * 24 * 3600 * 1000;
/// Longest duration of a message option (time_limit, min_backoff, max_backoff, max_age): a
/// year, in milliseconds.
inline constexpr std::int64_t max_option_ms = 365LL * 24 * 3600 * 1000;
/// Most retries a message option may ask for.
inline constexpr std::int64_t max_retries = 1'000'000;
/// Largest progress a task reports (task_context::set_progress), as JSON text.
inline constexpr std::size_t max_progress_bytes = 4096;
/// Message timestamps: from the Unix epoch to the end of year 9999, in milliseconds.
inline constexpr std::int64_t max_timestamp_ms = 253'402'300'799'999;

/// The first fault of the options every Troupe middleware reads, as text that names the option
/// and its range ("time_limit: 10000000000000 is out of range (0 to 31536000000 ms)"); none when
/// they are sound. Options that are not a JSON object are a fault; keys Troupe does not know
/// are left to their middleware.
std::optional<std::string> check_message_options(std::string_view options_json);

} // namespace troupe::limits
