// The per-queue statistics and the counts of finished rows behind them (migration 5 on):
// each statement that moves rows into or out of a finished state appends its change, the
// janitor folds the changes into the counts, and a recount rebuilds them from the rows.
#include "storage/counts.hpp"

#include "storage/queries.hpp"
#include "storage/statements.hpp"
#include "troupe/admin_records.hpp"
#include "troupe/error.hpp"

namespace troupe::storage {

std::vector<troupe::queue_stats> queue_statistics(connection& conn, const statement_set& stmts,
                                                  const std::string* only_queue) {
  params p{only_queue ? std::optional<std::string>(*only_queue) : std::nullopt};
  // From migration 5 on, the finished states come from their counts, not from the rows.
  auto res =
    conn.run(stmts.get(stmts.version() >= 5 ? sql::queue_stats_counted : sql::queue_stats), p);
  std::vector<troupe::queue_stats> out;
  for (int r = 0; r < res.rows(); ++r) {
    troupe::queue_stats s;
    s.queue = res.text(r, 0);
    s.queued = res.int64(r, 1);
    s.running = res.int64(r, 2);
    s.done = res.int64(r, 3);
    s.failed = res.int64(r, 4);
    s.cancelled = res.int64(r, 5);
    s.ready = res.int64(r, 6);
    s.scheduled = res.int64(r, 7);
    s.oldest_ready_seconds = res.float8(r, 8);
    out.push_back(std::move(s));
  }
  if (only_queue && out.empty())
    out.push_back(troupe::queue_stats{*only_queue});
  return out;
}

std::vector<std::pair<std::string, std::int64_t>>
failed_recently(connection& conn, const statement_set& stmts, std::chrono::seconds window) {
  auto res = conn.run(stmts.get(sql::failed_recently), {std::to_string(window.count())});
  std::vector<std::pair<std::string, std::int64_t>> out;
  for (int r = 0; r < res.rows(); ++r)
    out.emplace_back(std::string(res.text(r, 0)), res.int64(r, 1));
  return out;
}

std::int64_t fold_state_counts(connection& conn, const statement_set& stmts) {
  return conn.run(stmts.get(sql::fold_state_counts), {}).int64(0, 0);
}

std::int64_t recount_states(connection& conn, const statement_set& stmts,
                            std::chrono::milliseconds lock_wait) {
  conn.begin("recount_states");
  try {
    conn.run(stmts.get(sql::lock_state_counts), {std::to_string(lock_wait.count())});
    try {
      conn.run(stmts.get(sql::lock_state_count_changes), {});
    } catch (const error& e) {
      if (e.sqlstate() != "55P03") // lock_not_available: the lock timeout
        throw;
      throw error(errc::timeout,
                  "the recount could not lock the count changes within " +
                    std::to_string(lock_wait.count()) +
                    "ms: a transaction that finished, cancelled, retried, re-sent or purged "
                    "messages is still open; try again");
    }
    conn.run(stmts.get(sql::clear_state_counts), {});
    auto n = conn.run(stmts.get(sql::recount_states), {}).int64(0, 0);
    conn.commit("recount_states");
    return n;
  } catch (...) {
    conn.rollback_quietly();
    throw;
  }
}

} // namespace troupe::storage
