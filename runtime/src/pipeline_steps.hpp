// How a pipeline's next step rides in its predecessor's options (`pipe_target`, a JSON object:
// id, queue, task, args, options, priority, delay_ms), written by troupe::pipeline and read by
// the pipelines middleware. Internal to Troupe.
#pragma once

#include "troupe/message.hpp"

#include <optional>
#include <string>
#include <string_view>

namespace troupe::detail {

/// `m` as a pipe_target object.
std::string step_json(const message& m);

/// The next step that `options_json` carries, with `result_json` appended to its arguments
/// unless it says pipe_ignore; none when there is no pipe_target. Throws
/// troupe::error(decode_failed) when the pipe_target is malformed.
std::optional<message> next_step(std::string_view options_json, std::string_view result_json);

} // namespace troupe::detail
