// How the steps of a composition ride in the options of the messages before them, written by
// troupe::pipeline and troupe::group and read by the pipelines middleware and the group
// triggers of the queue table (storage/migrations/006_compositions.sql). Internal to Troupe.
//   pipe_target  the next step: a message as a JSON object (id, queue, task, args, options,
//                priority, delay_ms), or {"group": {"members": [messages]}}, a group's members
//   group_def    on the first published message of a group: {id, members (the id of each
//                member's result message, in submission order), on_success and on_failure
//                (messages), pipe_target (the step after the group)}
//   group_id     on the message whose result is a member's
#pragma once

#include "troupe/composition.hpp"
#include "troupe/message.hpp"

#include <string>
#include <string_view>
#include <vector>

namespace troupe::detail {

/// `m` as a JSON object of a pipe_target.
std::string step_json(const message& m);

/// The messages of the next step that `options_json` carries (none without a pipe_target),
/// each with `result_json` appended to its arguments unless it says pipe_ignore. Throws
/// troupe::error(decode_failed) when the pipe_target is malformed.
std::vector<message> next_steps(std::string_view options_json, std::string_view result_json);

/// What publishing `steps` writes: the first step's messages, carrying the rest, each message
/// with `composition_id`; the last step (a message) also gets `group_id` when `group_id` is not
/// empty.
std::vector<message> render_pipeline(const std::vector<step>& steps,
                                     const std::string& composition_id,
                                     const std::string& group_id);

/// What publishing `g` writes: each member's first messages, with `composition_id`, the first
/// carrying group_def, whose pipe_target is `pipe_target_json` (none when empty).
std::vector<message> render_group(const group& g, const std::string& composition_id,
                                  const std::string& pipe_target_json);

/// Every message id `steps` (or `g`) holds, nested ones and callbacks included, in order.
void collect_ids(const std::vector<step>& steps, std::vector<std::string>& out);
void collect_ids(const group& g, std::vector<std::string>& out);

/// Throws troupe::error(invalid_argument) naming `what` when `ids` holds an id twice.
void require_unique(std::vector<std::string> ids, std::string_view what);

/// `options` for each of `n` messages: the delay only; a deduplication key is refused.
std::vector<enqueue_options> composition_options(const enqueue_options& options, std::size_t n,
                                                 std::string_view what);

} // namespace troupe::detail
