#include "actors/execute.hpp"

#include "troupe/error.hpp"
#include "troupe/json.hpp"

#include <cxxabi.h>
#include <fmt/chrono.h>
#include <fmt/format.h>

#include <chrono>
#include <cstdlib>
#include <typeinfo>

namespace troupe::actors {

namespace {

std::string demangle(const char* name) {
  int status = 0;
  char* out = abi::__cxa_demangle(name, nullptr, nullptr, &status);
  std::string result = (status == 0 && out) ? out : name;
  std::free(out);
  return result;
}

std::string utc_now_iso() {
  auto now = std::chrono::system_clock::now();
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()) % 1000;
  return fmt::format("{:%Y-%m-%dT%H:%M:%S}.{:03}Z",
                     fmt::gmtime(std::chrono::system_clock::to_time_t(now)), ms.count());
}

storage::outcome failed(const storage::claimed_message& msg, std::string_view type,
                        std::string_view text) {
  storage::outcome o;
  o.id = msg.id;
  o.attempt = msg.attempt;
  o.state = storage::outcome_state::failed;
  o.error_json = failure_record(type, text, msg.attempt);
  return o;
}

} // namespace

std::string failure_record(std::string_view type, std::string_view text, std::int32_t attempt) {
  if (text.size() > max_failure_text) {
    // Cut on a UTF-8 character boundary.
    auto cut = max_failure_text;
    while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xc0) == 0x80)
      --cut;
    text = text.substr(0, cut);
  }
  return fmt::format(R"({{"type":{},"text":{},"time":{},"attempt":{}}})", json_quote(type),
                     json_quote(text), json_quote(utc_now_iso()), attempt);
}

storage::outcome execute(const task_registry& registry, const storage::claimed_message& msg,
                         const std::string& queue) {
  const auto* entry = registry.find(msg.task);
  if (entry == nullptr)
    return failed(msg, "troupe::unknown_task",
                  fmt::format("no task named \"{}\" is registered on this node", msg.task));
  task_context ctx{msg.id,      queue,        msg.task,          msg.options_json,
                   msg.attempt, msg.priority, msg.enqueued_at_ms};
  try {
    storage::outcome o;
    o.id = msg.id;
    o.attempt = msg.attempt;
    o.state = storage::outcome_state::done;
    o.result_json = entry->invoke(ctx, msg.args_json);
    if (!is_storable_json_text(o.result_json))
      return failed(msg, "troupe::result_not_storable",
                    "the task's result holds text that is not valid UTF-8, or a NUL character, "
                    "which PostgreSQL cannot store");
    return o;
  } catch (const error& e) {
    if (e.code() == errc::decode_failed)
      return failed(msg, "troupe::decode_failed", e.what());
    return failed(msg, "troupe::error", e.what());
  } catch (const std::exception& e) {
    return failed(msg, demangle(typeid(e).name()), e.what());
  } catch (...) {
    auto* type = abi::__cxa_current_exception_type();
    return failed(msg, type ? demangle(type->name()) : "unknown", "non-standard exception");
  }
}

} // namespace troupe::actors
