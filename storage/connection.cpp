#include "storage/connection.hpp"

#include "troupe/area.hpp"
#include "troupe/error.hpp"
#include "troupe/log.hpp"

#include <fmt/format.h>
#include <libpq-fe.h>

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

std::string redact_dsn(std::string_view dsn) {
  // Rebuilt from libpq's own parse, so every spelling libpq accepts (quoted values, escapes,
  // URIs, percent-encoding) loses its password; a DSN libpq cannot parse is not echoed at all.
  std::string text(dsn);
  if (text.empty())
    return text;
  char* err = nullptr;
  PQconninfoOption* opts = PQconninfoParse(text.c_str(), &err);
  if (opts == nullptr) {
    PQfreemem(err);
    return "<unparsable connection string>";
  }
  std::string out;
  for (auto* o = opts; o->keyword != nullptr; ++o) {
    if (o->val == nullptr)
      continue;
    if (!out.empty())
      out.push_back(' ');
    out += o->keyword;
    out.push_back('=');
    out += std::string_view(o->keyword) == "password" ? std::string("***") : std::string(o->val);
  }
  PQconninfoFree(opts);
  return out.empty() ? "<libpq defaults>" : out;
}

std::string redact_secrets(std::string_view text) {
  std::string s(text);
  // URI form: scheme://user:password@host
  if (auto scheme = s.find("://"); scheme != std::string::npos) {
    auto at = s.find('@', scheme + 3);
    auto colon = s.find(':', scheme + 3);
    if (at != std::string::npos && colon != std::string::npos && colon < at)
      s.replace(colon + 1, at - colon - 1, "***");
    if (auto q = s.find("password=", scheme); q != std::string::npos) {
      auto end = s.find('&', q);
      s.replace(q + 9, (end == std::string::npos ? s.size() : end) - q - 9, "***");
    }
    return s;
  }
  // key=value form: password=secret or password='sec ret'
  for (std::size_t pos = s.find("password"); pos != std::string::npos;
       pos = s.find("password", pos + 1)) {
    auto eq = s.find_first_not_of(' ', pos + 8);
    if (eq == std::string::npos || s[eq] != '=')
      continue;
    auto start = s.find_first_not_of(' ', eq + 1);
    if (start == std::string::npos)
      break;
    std::size_t end = start;
    if (s[start] == '\'') {
      end = start + 1;
      while (end < s.size() && s[end] != '\'') {
        if (s[end] == '\\')
          ++end;
        ++end;
      }
      end = std::min(end + 1, s.size());
    } else {
      end = s.find(' ', start);
      if (end == std::string::npos)
        end = s.size();
    }
    s.replace(start, end - start, "***");
  }
  return s;
}

namespace {

// Refuses a DSN libpq cannot parse, before connecting. libpq's explanation quotes fragments of
// the DSN, so it is only passed on when the DSN cannot hold a password.
void check_parsable(const std::string& dsn) {
  char* err = nullptr;
  PQconninfoOption* opts = PQconninfoParse(dsn.c_str(), &err);
  if (opts != nullptr) {
    PQconninfoFree(opts);
    return;
  }
  std::string detail = err ? trim(err) : std::string();
  PQfreemem(err);
  bool may_hold_secret =
    dsn.find("password") != std::string::npos || dsn.find('@') != std::string::npos;
  throw error(errc::invalid_argument,
              "invalid PostgreSQL connection string" +
                (may_hold_secret || detail.empty() ? std::string() : ": " + detail));
}

// Server notices (e.g. "already exists, skipping") go to the log at debug level, not stderr.
void forward_notice(void*, const char* message) {
  std::string text(message);
  while (!text.empty() && text.back() == '\n')
    text.pop_back();
  log().debug("postgres: {}", text);
}

} // namespace

void connection::deleter::operator()(pg_conn* c) const noexcept {
  PQfinish(raw(c));
}

connection::connection(pg_conn* conn) : conn_(conn) {}
connection::connection(connection&&) noexcept = default;
connection& connection::operator=(connection&&) noexcept = default;
connection::~connection() = default;

connection connection::open(const std::string& dsn, std::string_view application_name) {
  check_parsable(dsn);
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
  PQsetNoticeProcessor(c, forward_notice, nullptr);
  connection out(c);
  // Custom plans always: a generic plan built while a table is empty can stay on a bad join.
  out.exec("SET plan_cache_mode = force_custom_plan", "session_setup");
  return out;
}

bool connection::ok() const noexcept {
  return conn_ && PQstatus(raw(conn_.get())) == CONNECTION_OK;
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
