// The payload of a wake notification: the name of the queue that has new messages. Any other
// payload is not a wake (a control announcement starts with '!'; anything else is ignored). No
// CAF here: the listener reads it, and so does its fuzz target (tests/fuzz/).
#pragma once

#include "troupe/area.hpp"

#include <string>
#include <string_view>

namespace troupe::actors {

/// Whether a notification payload names a queue; `queue` receives it.
inline bool parse_wake_payload(std::string_view payload, std::string& queue) {
  if (!is_valid_queue_name(payload))
    return false;
  queue.assign(payload);
  return true;
}

} // namespace troupe::actors
