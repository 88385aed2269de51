// The admin API's attempt history (troupe/admin.hpp): the area's setting, a message's
// attempts, and their purge. The records are written by the nodes' own statements.
#include "runtime/src/admin_impl.hpp"
#include "storage/operations.hpp"
#include "troupe/admin.hpp"

namespace troupe {

history_setting admin::attempt_history() {
  return impl_->with_connection([&](storage::connection& c) {
    impl_->require_operations(c, "attempt history");
    return storage::attempt_history_setting(c, *impl_->stmts);
  });
}

history_setting admin::set_attempt_history(bool on) {
  return impl_->with_connection([&](storage::connection& c) {
    impl_->require_operations(c, "attempt history");
    return storage::set_attempt_history(c, *impl_->stmts, on);
  });
}

attempt_page admin::history(const std::string& given, std::optional<std::int64_t> after,
                            std::int32_t limit) {
  auto id = message_id(given);
  if (limit < 1 || limit > 1000)
    throw error(errc::invalid_argument,
                "limit " + std::to_string(limit) + " is not between 1 and 1000");
  if (after && *after < 0)
    throw error(errc::invalid_argument, "cursor " + std::to_string(*after) + " is negative");
  return impl_->with_connection([&](storage::connection& c) {
    impl_->require_operations(c, "attempt history");
    return storage::attempt_history(c, *impl_->stmts, id, after, limit);
  });
}

std::int64_t admin::purge_history(const std::string& max_age) {
  if (max_age.empty())
    throw error(errc::invalid_argument, "the maximum age of the attempts to purge is empty");
  // Counted across a reconnect too: each batch that committed stays deleted.
  std::int64_t total = 0;
  return impl_->with_connection([&](storage::connection& c) {
    impl_->require_operations(c, "attempt history");
    for (;;) {
      auto n = storage::purge_attempts(c, *impl_->stmts, max_age, 10000);
      total += n;
      if (n == 0)
        return total;
    }
  });
}

} // namespace troupe
