// A caller's own connection, borrowed for transactional and asynchronous publishing.
#include "storage/borrowed_connection.hpp"
#include "storage/pq_support.hpp"

#include <libpq-fe.h>

namespace troupe::storage {

namespace {

constexpr const char* savepoint_sql = "SAVEPOINT troupe_publish";
constexpr const char* release_sql = "RELEASE SAVEPOINT troupe_publish";
constexpr const char* rollback_sql = "ROLLBACK TO SAVEPOINT troupe_publish";

bool run_quietly(PGconn* c, const char* sql) noexcept {
  PGresult* r = PQexec(c, sql);
  bool good = r && PQresultStatus(r) == PGRES_COMMAND_OK;
  PQclear(r);
  return good;
}

} // namespace

bool borrowed_connection::in_transaction() const noexcept {
  return conn_ != nullptr && PQtransactionStatus(conn_) == PQTRANS_INTRANS;
}

bool borrowed_connection::nonblocking() const noexcept {
  return conn_ != nullptr && PQisnonblocking(conn_) == 1;
}

bool borrowed_connection::busy() const noexcept {
  return conn_ != nullptr && PQisBusy(conn_) != 0;
}

result borrowed_connection::run(const statement& st, const params& values) {
  detail::param_arrays pa(values);
  return detail::checked(conn_,
                         PQexecParams(conn_, st.text.c_str(), static_cast<int>(values.size()),
                                      nullptr, pa.values.data(), nullptr, nullptr, 0),
                         st.name);
}

void borrowed_connection::savepoint() {
  detail::checked(conn_, PQexec(conn_, savepoint_sql), "savepoint");
}

void borrowed_connection::release_savepoint() noexcept {
  run_quietly(conn_, release_sql);
}

void borrowed_connection::rollback_to_savepoint() noexcept {
  run_quietly(conn_, rollback_sql);
}

void borrowed_connection::send(const statement& st, const params& values) {
  detail::param_arrays pa(values);
  if (PQsendQueryParams(conn_, st.text.c_str(), static_cast<int>(values.size()), nullptr,
                        pa.values.data(), nullptr, nullptr, 0) == 0)
    throw_error(conn_, nullptr, st.name);
}

void borrowed_connection::send(savepoint_step step) {
  const char* sql = step == savepoint_step::begin     ? savepoint_sql
                    : step == savepoint_step::release ? release_sql
                                                      : rollback_sql;
  if (PQsendQuery(conn_, sql) == 0)
    throw_error(conn_, nullptr, "savepoint");
}

bool borrowed_connection::flush() {
  int r = PQflush(conn_);
  if (r < 0)
    throw_error(conn_, nullptr, "asynchronous publish");
  return r == 0;
}

void borrowed_connection::consume_input() {
  if (PQconsumeInput(conn_) == 0)
    throw_error(conn_, nullptr, "asynchronous publish");
}

bool borrowed_connection::result_ready() const noexcept {
  return PQisBusy(conn_) == 0;
}

std::optional<result> borrowed_connection::next_result() {
  PGresult* r = PQgetResult(conn_);
  if (r == nullptr)
    return std::nullopt;
  return result(r);
}

void borrowed_connection::raise(const result& res, std::string_view label) const {
  throw_error(conn_, res.native(), label);
}

int borrowed_connection::socket() const noexcept {
  return PQsocket(conn_);
}

void borrowed_connection::cancel() noexcept {
  if (PGcancel* c = PQgetCancel(conn_)) {
    char err[256];
    PQcancel(c, err, sizeof err);
    PQfreeCancel(c);
  }
}

} // namespace troupe::storage
