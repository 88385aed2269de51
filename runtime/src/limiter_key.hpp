// A named limiter as the coordination functions of migration 7 see it: what a guard through a
// client and the node's limiter actor both pass to storage/coordination.hpp. Internal.
#pragma once

#include "storage/coordination.hpp"
#include "troupe/coordination.hpp"

#include <string>

namespace troupe::detail {

/// `l` in scope '' (a named limiter).
inline storage::limiter_key key_of(const limit& l) {
  return {"", l.key, std::string(to_string(l.kind)), l.capacity,
          static_cast<std::int64_t>(l.span.count())};
}

} // namespace troupe::detail
