// admin::overview: what the exporter and the dashboard show of each queue: three reads
// (the statistics, the pauses, the recent failures) in one transaction on one connection.
#include "troupe/admin.hpp"

#include "runtime/src/admin_impl.hpp"
#include "storage/counts.hpp"
#include "storage/operations.hpp"
#include "storage/queries.hpp"

#include <algorithm>
#include <map>

namespace troupe {

std::vector<queue_overview> admin::overview(const std::vector<std::string>& only,
                                            std::chrono::seconds failed_window) {
  for (const auto& q : only)
    validate_queue_name(q);
  if (failed_window < std::chrono::seconds(1) || failed_window > std::chrono::hours(24 * 7))
    throw error(errc::invalid_argument, "the failed window must be from 1s to 7 days, got " +
                                          std::to_string(failed_window.count()) + "s");
  return impl_->with_connection([&](storage::connection& c) {
    impl_->require_operations(c, "the queue overview");
    const auto& stmts = *impl_->stmts;
    c.begin("queue_overview");
    try {
      std::map<std::string, troupe::queue_overview> by_queue;
      for (auto& s : storage::queue_statistics(c, stmts, nullptr)) {
        auto name = s.queue;
        by_queue[name].stats = std::move(s);
      }
      for (const auto& q : storage::queue_control_status(c, stmts, {}))
        by_queue[q.queue].paused = q.paused;
      for (const auto& [q, n] : storage::failed_recently(c, stmts, failed_window))
        by_queue[q].failed_recently = n;
      c.commit("queue_overview");
      std::vector<troupe::queue_overview> out;
      auto add = [&](const std::string& name) {
        auto i = by_queue.find(name);
        troupe::queue_overview o = i == by_queue.end() ? troupe::queue_overview{} : i->second;
        o.stats.queue = name;
        out.push_back(std::move(o));
      };
      if (only.empty()) {
        for (const auto& [name, o] : by_queue)
          add(name);
      } else {
        auto names = only;
        std::sort(names.begin(), names.end());
        names.erase(std::unique(names.begin(), names.end()), names.end());
        for (const auto& name : names)
          add(name);
      }
      return out;
    } catch (...) {
      c.rollback_quietly();
      throw;
    }
  });
}

} // namespace troupe
