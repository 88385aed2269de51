#include "storage/connection.hpp"

#include "storage/naming.hpp"
#include "troupe/dsn.hpp"
#include "troupe/error.hpp"
#include "troupe/log.hpp"

#include <fmt/format.h>
#include <libpq-fe.h>

#include <poll.h>

#include <algorithm>
#include <charconv>
#include <cstdlib>

// libpq's PGconn and PGresult are the structs pg_conn and pg_result that connection.hpp
// forward-declares, so no cast is needed between the two spellings.

namespace troupe::storage {

namespace {

PGconn* raw(pg_conn* c) {
  return c;
}
PGresult* raw(pg_result* r) {
  return r;
}
pg_result* wrap(PGresult* r) {
  return r;
}

errc classify(std::string_view sqlstate, bool connection_bad) {
  // No SQLSTATE means the server sent no error at all: libpq lost the connection (libpq does not
  // always mark it bad before the next call).
  if (connection_bad || sqlstate.empty() || sqlstate.starts_with("08") || sqlstate == "57P01" ||
      sqlstate == "57P02" || sqlstate == "57P03")
    return errc::connection_lost;
  if (sqlstate == "40001" || sqlstate == "40P01" || sqlstate == "55P03" || sqlstate == "57014" ||
      sqlstate == "53300")
    return errc::retryable;
  if (sqlstate.starts_with("23"))
    return errc::constraint_violated;
  if (sqlstate == "25P01" || sqlstate == "25P02")
    return errc::not_in_transaction;
  return errc::bug;
}

std::string trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' '))
    s.pop_back();
  return s;
}

} // namespace

void result::deleter::operator()(pg_result* r) const noexcept {
  PQclear(raw(r));
}

bool result::ok() const noexcept {
  if (!res_)
    return false;
  auto status = PQresultStatus(raw(res_.get()));
  return status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK;
}

int result::rows() const noexcept {
  return res_ ? PQntuples(raw(res_.get())) : 0;
}

bool result::is_null(int row, int col) const noexcept {
  return PQgetisnull(raw(res_.get()), row, col) != 0;
}

std::string_view result::text(int row, int col) const noexcept {
  auto* r = raw(res_.get());
  return {PQgetvalue(r, row, col), static_cast<std::size_t>(PQgetlength(r, row, col))};
}

std::int64_t result::int64(int row, int col) const {
  auto t = text(row, col);
  std::int64_t v = 0;
  auto [p, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
  if (ec != std::errc{} || p != t.data() + t.size())
    throw error(errc::bug, fmt::format("expected an integer in column {}, got \"{}\"", col, t));
  return v;
}

double result::float8(int row, int col) const {
  std::string t(text(row, col));
  char* end = nullptr;
  double v = std::strtod(t.c_str(), &end);
  if (t.empty() || end != t.c_str() + t.size())
    throw error(errc::bug, fmt::format("expected a number in column {}, got \"{}\"", col, t));
  return v;
}

std::int64_t result::affected() const {
  const char* n = PQcmdTuples(raw(res_.get()));
  return (n && *n) ? std::atoll(n) : 0;
}

namespace {

void append_array_item(std::string& out, std::string_view item) {
  out.push_back('"');
  for (char c : item) {
    if (c == '"' || c == '\\')
      out.push_back('\\');
    out.push_back(c);
  }
  out.push_back('"');
}

} // namespace

std::string array_literal(const std::vector<std::string>& items) {
  std::string out = "{";
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (i)
      out.push_back(',');
    append_array_item(out, items[i]);
  }
  out.push_back('}');
  return out;
}

std::string array_literal(const std::vector<std::optional<std::string>>& items) {
  std::string out = "{";
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (i)
      out.push_back(',');
    if (items[i])
      append_array_item(out, *items[i]);
    else
      out += "NULL";
  }
  out.push_back('}');
  return out;
}

std::vector<std::string> parse_array_literal(std::string_view text) {
  std::vector<std::string> out;
  if (text.size() < 2 || text.front() != '{' || text.back() != '}')
    return out;
  text = text.substr(1, text.size() - 2);
  std::size_t i = 0;
  while (i < text.size()) {
    std::string item;
    if (text[i] == '"') {
      ++i;
      while (i < text.size() && text[i] != '"') {
        if (text[i] == '\\' && i + 1 < text.size())
          ++i;
        item.push_back(text[i++]);
      }
      ++i; // closing quote
    } else {
      while (i < text.size() && text[i] != ',')
        item.push_back(text[i++]);
    }
    out.push_back(std::move(item));
    if (i < text.size() && text[i] == ',')
      ++i;
  }
  return out;
}

namespace {

// Strips the trailing newline libpq leaves on messages.
std::string message_text(const char* text) {
  return trim(text ? std::string(text) : std::string());
}

} // namespace

// Where a connection's server notices go: warnings to a receiver when one is set, the rest
// (e.g. "already exists, skipping") to the log at debug level, never to stderr.
struct connection::notices {
  std::function<void(std::string_view)> warning;

  static void receive(void* self, const PGresult* res) {
    auto* n = static_cast<notices*>(self);
    const char* severity = PQresultErrorField(res, PG_DIAG_SEVERITY_NONLOCALIZED);
    if (n->warning && severity != nullptr && std::string_view(severity) == "WARNING") {
      n->warning(message_text(PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY)));
      return;
    }
    log().debug("postgres: {}", message_text(PQresultErrorMessage(res)));
  }
};

void connection::deleter::operator()(pg_conn* c) const noexcept {
  PQfinish(raw(c));
}

connection::connection(pg_conn* conn) : notices_(std::make_unique<notices>()), conn_(conn) {
  PQsetNoticeReceiver(raw(conn_.get()), &notices::receive, notices_.get());
}
connection::connection(connection&&) noexcept = default;
connection& connection::operator=(connection&&) noexcept = default;
connection::~connection() = default;

connection connection::open(const std::string& dsn, std::string_view application_name) {
  validate_dsn(dsn);
  // Defaults first, the DSN after them, so whatever the DSN sets wins. The timeouts and
  // keepalives make a dead server or a half-open connection an error within seconds instead of
  // a call that blocks its actor (and a shutdown) for minutes.
  const char* keys[] = {"application_name",    "connect_timeout",  "keepalives", "keepalives_idle",
                        "keepalives_interval", "keepalives_count", "dbname",     nullptr};
  std::string app(application_name);
  const char* values[] = {app.c_str(), "10", "1", "30", "10", "3", dsn.c_str(), nullptr};
  PGconn* c = PQconnectdbParams(keys, values, 1);
  if (c == nullptr)
    throw error(errc::connection_lost, "cannot allocate a PostgreSQL connection");
  if (PQstatus(c) != CONNECTION_OK) {
    auto msg = trim(PQerrorMessage(c));
    PQfinish(c);
    throw error(errc::connection_lost,
                fmt::format("cannot connect to PostgreSQL ({}): {}", redact_dsn(dsn), msg));
  }
  connection out(c);
  // Custom plans always: a generic plan built while a table is empty can stay on a bad join.
  out.exec("SET plan_cache_mode = force_custom_plan", "session_setup");
  return out;
}

bool connection::ok() const noexcept {
  return conn_ && PQstatus(raw(conn_.get())) == CONNECTION_OK;
}

int connection::server_version() const noexcept {
  return PQserverVersion(raw(conn_.get()));
}

void connection::on_warning(std::function<void(std::string_view)> receiver) {
  notices_->warning = std::move(receiver);
}

int connection::backend_pid() const noexcept {
  return PQbackendPID(raw(conn_.get()));
}

void throw_error(pg_conn* conn, pg_result* res, std::string_view label) {
  std::string sqlstate;
  std::string msg;
  if (res) {
    if (const char* s = PQresultErrorField(raw(res), PG_DIAG_SQLSTATE))
      sqlstate = s;
    msg = trim(PQresultErrorMessage(raw(res)));
  }
  if (msg.empty() && conn)
    msg = trim(PQerrorMessage(raw(conn)));
  bool bad = conn == nullptr || PQstatus(raw(conn)) != CONNECTION_OK;
  auto code = classify(sqlstate, bad);
  throw error(code,
              fmt::format("{} failed{}: {}", label,
                          sqlstate.empty() ? std::string() : " [" + sqlstate + "]", msg),
              sqlstate);
}

namespace {

result check(pg_conn* conn, PGresult* r, std::string_view label) {
  result out(wrap(r));
  auto status = r ? PQresultStatus(r) : PGRES_FATAL_ERROR;
  if (status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK)
    throw_error(conn, wrap(r), label);
  return out;
}

struct param_arrays {
  std::vector<const char*> values;
  explicit param_arrays(const params& ps) {
    values.reserve(ps.size());
    for (const auto& p : ps)
      values.push_back(p ? p->c_str() : nullptr);
  }
};

} // namespace

result connection::exec(std::string_view sql, std::string_view label) {
  std::string text(sql);
  return check(conn_.get(), PQexec(raw(conn_.get()), text.c_str()), label);
}

result connection::exec_params(std::string_view sql, const params& values, std::string_view label) {
  std::string text(sql);
  param_arrays pa(values);
  return check(conn_.get(),
               PQexecParams(raw(conn_.get()), text.c_str(), static_cast<int>(values.size()),
                            nullptr, pa.values.data(), nullptr, nullptr, 0),
               label);
}

std::int64_t connection::copy_in_parts(const statement& st, const std::vector<std::string>& parts,
                                       std::string_view before, std::string_view after) {
  if (parts.empty())
    return 0;
  auto* c = raw(conn_.get());
  std::string query(before);
  for (std::size_t i = 0; i < parts.size(); ++i)
    query += (i == 0 ? "" : "; ") + st.text;
  query += after;
  PGresult* next = PQexec(c, query.c_str());
  if (!next || PQresultStatus(next) != PGRES_COPY_IN) {
    if (next && PQresultStatus(next) != PGRES_FATAL_ERROR) {
      PQclear(next);
      throw error(errc::bug, st.name + " is not a COPY FROM STDIN statement");
    }
    check(conn_.get(), next, st.name);
  }
  std::int64_t copied = 0;
  PGresult* failed = nullptr; // the first statement that failed
  bool sent = true;
  for (std::size_t i = 0; next; ++i) {
    PQclear(next);
    next = nullptr;
    std::string_view data = i < parts.size() ? std::string_view(parts[i]) : std::string_view();
    constexpr std::size_t chunk = 1 << 20;
    for (std::size_t at = 0; sent && at < data.size(); at += chunk) {
      auto piece = data.substr(at, chunk);
      sent = PQputCopyData(c, piece.data(), static_cast<int>(piece.size())) == 1;
    }
    // Ending a COPY with an error message makes the server abort it when its data did not go
    // (or when the server asks for more COPYs than there are parts).
    const char* abort = !sent               ? "troupe: sending COPY data failed"
                        : i >= parts.size() ? "troupe: more COPY statements than parts"
                                            : nullptr;
    sent = PQputCopyEnd(c, abort) == 1 && sent;
    // This COPY's result and those of the statements up to the next COPY (or the end).
    while (PGresult* r = PQgetResult(c)) {
      auto status = PQresultStatus(r);
      if (status == PGRES_COPY_IN) {
        next = r;
        break;
      }
      if (status == PGRES_FATAL_ERROR && !failed) {
        failed = r;
        continue;
      }
      if (status == PGRES_COMMAND_OK && std::string_view(PQcmdStatus(r)).starts_with("COPY "))
        copied += result(wrap(r)).affected();
      else
        PQclear(r);
    }
    if (!sent)
      break;
  }
  if (next)
    PQclear(next); // only when sending failed: the connection is reported broken below
  if (failed)
    check(conn_.get(), failed, st.name);
  if (!sent)
    throw_error(conn_.get(), nullptr, st.name);
  return copied;
}

std::string connection::literal(std::string_view text) const {
  auto* c = raw(conn_.get());
  char* quoted = PQescapeLiteral(c, text.data(), text.size());
  if (!quoted)
    throw_error(conn_.get(), nullptr, "quote a literal");
  std::string out(quoted);
  PQfreemem(quoted);
  return out;
}

result connection::run_between(const statement& st, const params& values, std::string_view before,
                               std::string_view after) {
  prepare(st);
  auto* c = raw(conn_.get());
  if (PQenterPipelineMode(c) != 1)
    throw_error(conn_.get(), nullptr, st.name);
  std::string first(before);
  std::string last(after);
  param_arrays pa(values);
  auto send_plain = [&](const std::string& sql) {
    return sql.empty() ||
           PQsendQueryParams(c, sql.c_str(), 0, nullptr, nullptr, nullptr, nullptr, 0) == 1;
  };
  bool sent = send_plain(first) &&
              PQsendQueryPrepared(c, st.name.c_str(), static_cast<int>(values.size()),
                                  pa.values.data(), nullptr, nullptr, 0) == 1 &&
              send_plain(last) && PQpipelineSync(c) == 1;
  if (!sent)
    throw_error(conn_.get(), nullptr, st.name); // a connection that cannot send is broken
  // Each query's results end with a null; the server skips what follows a failed query up to
  // the sync point, and reports those as aborted.
  int queries = (first.empty() ? 0 : 1) + 1 + (last.empty() ? 0 : 1);
  int own = first.empty() ? 0 : 1;
  result out;
  PGresult* failed = nullptr;
  for (int q = 0; q < queries && PQstatus(c) == CONNECTION_OK; ++q) {
    while (PGresult* r = PQgetResult(c)) {
      auto status = PQresultStatus(r);
      if (status == PGRES_FATAL_ERROR && !failed)
        failed = r;
      else if (q == own && (status == PGRES_TUPLES_OK || status == PGRES_COMMAND_OK))
        out = result(wrap(r));
      else
        PQclear(r);
    }
  }
  if (PGresult* sync = PQgetResult(c))
    PQclear(sync);
  PQexitPipelineMode(c);
  if (failed)
    check(conn_.get(), failed, st.name);
  if (PQstatus(c) != CONNECTION_OK)
    throw_error(conn_.get(), nullptr, st.name);
  return out;
}

void connection::prepare(const statement& st) {
  auto i = prepared_.find(st.name);
  if (i == prepared_.end() || i->second != st.text) {
    if (i != prepared_.end()) {
      exec("DEALLOCATE " + quote_identifier(st.name), st.name);
      prepared_.erase(i);
    }
    check(conn_.get(), PQprepare(raw(conn_.get()), st.name.c_str(), st.text.c_str(), 0, nullptr),
          st.name);
    prepared_.emplace(st.name, st.text);
  }
}

result connection::run(const statement& st, const params& values) {
  prepare(st);
  param_arrays pa(values);
  return check(conn_.get(),
               PQexecPrepared(raw(conn_.get()), st.name.c_str(), static_cast<int>(values.size()),
                              pa.values.data(), nullptr, nullptr, 0),
               st.name);
}

} // namespace troupe::storage

namespace troupe::storage {

void connection::begin(std::string_view label) {
  exec("BEGIN", label);
}

void connection::commit(std::string_view label) {
  exec("COMMIT", label);
}

void connection::rollback_quietly() noexcept {
  if (ok())
    PQclear(PQexec(raw(conn_.get()), "ROLLBACK"));
}

void connection::listen(std::string_view channel) {
  exec("LISTEN " + quote_identifier(channel), "listen");
}

std::vector<notification> connection::wait_for_notifications(std::chrono::milliseconds timeout) {
  auto* c = raw(conn_.get());
  std::vector<notification> out;
  auto collect = [&] {
    while (PGnotify* n = PQnotifies(c)) {
      out.push_back(
        notification{n->relname ? n->relname : "", n->extra ? n->extra : "", n->be_pid});
      PQfreemem(n);
    }
  };
  if (!ok())
    throw_error(conn_.get(), nullptr, "wait for notifications");
  collect(); // what an earlier statement's results brought along
  if (!out.empty())
    return out;
  pollfd pfd{PQsocket(c), POLLIN, 0};
  int ready = ::poll(&pfd, 1, static_cast<int>(std::max<std::int64_t>(0, timeout.count())));
  if (ready > 0 || timeout.count() <= 0) {
    // PQconsumeInput reads what arrived; a lost connection shows as a failure here or as a bad
    // status once the server's FATAL has been read.
    if (PQconsumeInput(c) == 0 || PQstatus(c) != CONNECTION_OK)
      throw error(errc::connection_lost, "lost the connection while waiting for notifications: " +
                                           message_text(PQerrorMessage(c)));
    collect();
  }
  return out;
}

// ---------------------------------------------------------------- a caller's connection

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
  param_arrays pa(values);
  return check(conn_,
               PQexecParams(conn_, st.text.c_str(), static_cast<int>(values.size()), nullptr,
                            pa.values.data(), nullptr, nullptr, 0),
               st.name);
}

void borrowed_connection::savepoint() {
  check(conn_, PQexec(conn_, savepoint_sql), "savepoint");
}

void borrowed_connection::release_savepoint() noexcept {
  run_quietly(conn_, release_sql);
}

void borrowed_connection::rollback_to_savepoint() noexcept {
  run_quietly(conn_, rollback_sql);
}

void borrowed_connection::send(const statement& st, const params& values) {
  param_arrays pa(values);
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
  return result(wrap(r));
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
