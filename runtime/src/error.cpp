#include "troupe/error.hpp"

namespace troupe {

std::string_view to_string(errc code) noexcept {
  switch (code) {
  case errc::connection_lost:
    return "connection_lost";
  case errc::retryable:
    return "retryable";
  case errc::constraint_violated:
    return "constraint_violated";
  case errc::bug:
    return "bug";
  case errc::invalid_argument:
    return "invalid_argument";
  case errc::unknown_task:
    return "unknown_task";
  case errc::decode_failed:
    return "decode_failed";
  case errc::not_in_transaction:
    return "not_in_transaction";
  case errc::timeout:
    return "timeout";
  case errc::not_found:
    return "not_found";
  case errc::shutting_down:
    return "shutting_down";
  case errc::task_failed:
    return "task_failed";
  case errc::task_skipped:
    return "task_skipped";
  case errc::task_cancelled:
    return "task_cancelled";
  case errc::cancelled:
    return "cancelled";
  }
  return "unknown";
}

} // namespace troupe
