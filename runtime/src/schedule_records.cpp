#include "troupe/schedule_records.hpp"

namespace troupe {

const char* to_string(overlap_policy p) noexcept {
  return p == overlap_policy::skip ? "skip" : "allow";
}

const char* to_string(catch_up_policy p) noexcept {
  return p == catch_up_policy::none ? "none" : "coalesce";
}

} // namespace troupe
