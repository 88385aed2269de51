#include "troupe/transactional.hpp"

#include "storage/queries.hpp"
#include "troupe/client.hpp"
#include "troupe/error.hpp"

#include <fmt/format.h>
#include <libpq-fe.h>

namespace troupe {

namespace {

void require_transaction(pg_conn* conn, std::string_view what) {
  if (conn == nullptr)
    throw error(errc::invalid_argument, std::string(what) + ": no connection given");
  if (PQtransactionStatus(conn) != PQTRANS_INTRANS)
    throw error(errc::not_in_transaction,
                std::string(what) + " requires an active transaction on the caller's connection "
                                    "(BEGIN first); nothing was written");
}

// The area's statements, rendered once per area and reused.
const storage::statement& enqueue_statement(const area& where) {
  thread_local std::string key;
  thread_local storage::statement_set_ptr stmts;
  auto wanted = where.schema + '\0' + where.prefix;
  if (!stmts || key != wanted) {
    stmts = storage::make_statement_set(where);
    key = wanted;
  }
  return stmts->get("enqueue_messages");
}

void run_enqueue(pg_conn* conn, const area& where, const std::vector<message>& batch) {
  std::vector<storage::new_message> rows;
  rows.reserve(batch.size());
  for (const auto& m : batch)
    rows.push_back(to_new_message(m));
  // The caller's connection: run the statement unprepared, so no prepared statement of ours is
  // left behind on it.
  auto params = storage::enqueue_params(where, rows, true);
  std::vector<const char*> values;
  for (const auto& p : params)
    values.push_back(p ? p->c_str() : nullptr);
  const auto& st = enqueue_statement(where);
  PGresult* res = PQexecParams(conn, st.text.c_str(), static_cast<int>(values.size()), nullptr,
                               values.data(), nullptr, nullptr, 0);
  storage::result owned(res); // freed on every path
  if (PQresultStatus(res) != PGRES_TUPLES_OK)
    storage::throw_error(conn, res, st.name);
}

void before(std::vector<message>& batch, const std::vector<middleware_ptr>& mw) {
  for (auto& m : batch)
    for (const auto& h : mw)
      h->before_enqueue(m);
}

void after(const std::vector<message>& batch, const std::vector<middleware_ptr>& mw) {
  for (const auto& m : batch)
    for (auto i = mw.rbegin(); i != mw.rend(); ++i)
      (*i)->after_enqueue(m);
}

} // namespace

message enqueue_in_transaction(pg_conn* conn, const area& where, message m,
                               const std::vector<middleware_ptr>& middleware) {
  require_transaction(conn, "enqueue_in_transaction");
  validate_area(where);
  std::vector<message> one{std::move(m)};
  before(one, middleware);
  validate_message(one.front());
  run_enqueue(conn, where, one);
  after(one, middleware);
  return std::move(one.front());
}

std::vector<message> enqueue_many_in_transaction(pg_conn* conn, const area& where,
                                                 std::vector<message> batch,
                                                 const std::vector<middleware_ptr>& middleware) {
  require_transaction(conn, "enqueue_many_in_transaction");
  validate_area(where);
  if (batch.size() > max_batch_size)
    throw error(errc::invalid_argument,
                fmt::format("batch limit is {} messages, got {}", max_batch_size, batch.size()));
  if (batch.empty())
    return batch;
  before(batch, middleware);
  for (const auto& m : batch)
    validate_message(m);
  auto simple = [&](const char* sql) {
    PGresult* r = PQexec(conn, sql);
    bool ok = PQresultStatus(r) == PGRES_COMMAND_OK;
    PQclear(r);
    return ok;
  };
  if (!simple("SAVEPOINT troupe_enqueue_many"))
    throw error(errc::bug, "could not set a savepoint for the batch");
  try {
    run_enqueue(conn, where, batch);
  } catch (...) {
    simple("ROLLBACK TO SAVEPOINT troupe_enqueue_many");
    simple("RELEASE SAVEPOINT troupe_enqueue_many");
    throw;
  }
  simple("RELEASE SAVEPOINT troupe_enqueue_many");
  after(batch, middleware);
  return batch;
}

} // namespace troupe
