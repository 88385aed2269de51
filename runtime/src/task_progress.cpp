// task_context::set_progress: the value checked on the task's thread, then handed to the
// node's progress sink (actors/attempt_board.hpp), which coalesces it. Never throws.
#include "troupe/json.hpp"
#include "troupe/limits.hpp"
#include "troupe/log.hpp"
#include "troupe/task.hpp"

#include <fmt/format.h>

#include <rapidjson/document.h>

#include <cmath>

namespace troupe {

namespace {

void drop(const task_context& ctx, std::string_view why) noexcept {
  if (ctx.progress_warned)
    return;
  ctx.progress_warned = true;
  try {
    log().warn("progress dropped message={} task={} attempt={}: {} (further drops in this "
               "attempt are not logged)",
               ctx.message_id, ctx.task, ctx.attempt, why);
  } catch (...) {
  }
}

} // namespace

void task_context::set_progress(double fraction) const noexcept {
  if (!progress)
    return;
  if (!std::isfinite(fraction) || fraction < 0 || fraction > 1) {
    drop(*this, "a fraction must be from 0 to 1");
    return;
  }
  try {
    progress->report(fmt::format("{}", fraction));
  } catch (...) {
    drop(*this, "out of memory");
  }
}

void task_context::set_progress(std::string_view json) const noexcept {
  if (!progress)
    return;
  try {
    if (json.size() > limits::max_progress_bytes) {
      drop(*this, fmt::format("{} bytes of JSON, above the limit of {}", json.size(),
                              limits::max_progress_bytes));
      return;
    }
    rapidjson::Document doc;
    doc.Parse(json.data(), json.size());
    if (doc.HasParseError() || !is_storable_json_text(json)) {
      drop(*this, "not a JSON value PostgreSQL can store");
      return;
    }
    progress->report(std::string(json));
  } catch (...) {
    drop(*this, "out of memory");
  }
}

} // namespace troupe
