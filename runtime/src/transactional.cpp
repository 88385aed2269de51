#include "troupe/transactional.hpp"

#include "publish_plan.hpp"
#include "storage/borrowed_connection.hpp"
#include "troupe/error.hpp"

namespace troupe {

namespace {

std::vector<message> run_plan(storage::borrowed_connection& conn, detail::publish_plan& plan,
                              bool savepoint) {
  if (!savepoint || plan.empty()) {
    while (auto step = plan.next())
      plan.accept(conn.run(*step->statement, step->values));
    return plan.finish(true);
  }
  conn.savepoint();
  try {
    while (auto step = plan.next())
      plan.accept(conn.run(*step->statement, step->values));
  } catch (...) {
    conn.rollback_to_savepoint();
    conn.release_savepoint();
    throw;
  }
  conn.release_savepoint();
  return plan.finish(true);
}

} // namespace

message enqueue_in_transaction(pg_conn* native, const area& where, message m,
                               const enqueue_options& options,
                               const std::vector<middleware_ptr>& middleware) {
  storage::borrowed_connection conn(native);
  detail::require_transaction(conn, "enqueue_in_transaction");
  std::vector<message> one;
  one.push_back(std::move(m));
  detail::publish_plan plan(detail::statements_for(where), std::move(one), {options}, middleware,
                            true);
  // A plain publish is one statement; deduplication takes two or three, in a savepoint.
  return std::move(run_plan(conn, plan, plan.multi_step()).front());
}

std::vector<message> enqueue_many_in_transaction(pg_conn* native, const area& where,
                                                 std::vector<message> batch,
                                                 std::vector<enqueue_options> options,
                                                 const std::vector<middleware_ptr>& middleware) {
  storage::borrowed_connection conn(native);
  detail::require_transaction(conn, "enqueue_many_in_transaction");
  detail::publish_plan plan(detail::statements_for(where), std::move(batch), std::move(options),
                            middleware, true);
  return run_plan(conn, plan, true);
}

} // namespace troupe
