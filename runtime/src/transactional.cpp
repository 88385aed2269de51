#include "troupe/transactional.hpp"

#include "publish_plan.hpp"
#include "storage/queries.hpp"
#include "troupe/error.hpp"

#include <fmt/format.h>
#include <libpq-fe.h>

namespace troupe {

namespace {

// The caller's connection: statements run unprepared, so none of ours is left behind on it.
storage::result run_step(pg_conn* conn, const detail::publish_step& step) {
  auto values = detail::param_pointers(step.values);
  PGresult* res = PQexecParams(conn, step.statement->text.c_str(), static_cast<int>(values.size()),
                               nullptr, values.data(), nullptr, nullptr, 0);
  storage::result owned(res); // freed on every path
  auto status = PQresultStatus(res);
  if (status != PGRES_TUPLES_OK && status != PGRES_COMMAND_OK)
    storage::throw_error(conn, res, step.statement->name);
  return owned;
}

bool simple(pg_conn* conn, const char* sql) {
  PGresult* r = PQexec(conn, sql);
  bool ok = PQresultStatus(r) == PGRES_COMMAND_OK;
  PQclear(r);
  return ok;
}

std::vector<message> run_plan(pg_conn* conn, detail::publish_plan& plan, bool savepoint) {
  if (!savepoint || plan.empty()) {
    while (auto step = plan.next())
      plan.accept(run_step(conn, *step));
    return plan.finish(true);
  }
  if (!simple(conn, "SAVEPOINT troupe_publish"))
    storage::throw_error(conn, nullptr, "savepoint");
  try {
    while (auto step = plan.next())
      plan.accept(run_step(conn, *step));
  } catch (...) {
    simple(conn, "ROLLBACK TO SAVEPOINT troupe_publish");
    simple(conn, "RELEASE SAVEPOINT troupe_publish");
    throw;
  }
  simple(conn, "RELEASE SAVEPOINT troupe_publish");
  return plan.finish(true);
}

} // namespace

message enqueue_in_transaction(pg_conn* conn, const area& where, message m,
                               const enqueue_options& options,
                               const std::vector<middleware_ptr>& middleware) {
  detail::require_transaction(conn, "enqueue_in_transaction");
  std::vector<message> one;
  one.push_back(std::move(m));
  detail::publish_plan plan(detail::statements_for(where), std::move(one), {options}, middleware,
                            true);
  // A plain publish is one statement; deduplication takes two or three, in a savepoint.
  return std::move(run_plan(conn, plan, plan.multi_step()).front());
}

std::vector<message> enqueue_many_in_transaction(pg_conn* conn, const area& where,
                                                 std::vector<message> batch,
                                                 std::vector<enqueue_options> options,
                                                 const std::vector<middleware_ptr>& middleware) {
  detail::require_transaction(conn, "enqueue_many_in_transaction");
  detail::publish_plan plan(detail::statements_for(where), std::move(batch), std::move(options),
                            middleware, true);
  return run_plan(conn, plan, true);
}

} // namespace troupe
