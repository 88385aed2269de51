// Results, the error taxonomy at the libpq boundary, and PostgreSQL's text arrays.
#include "storage/connection.hpp"
#include "storage/pq_support.hpp"

#include "troupe/error.hpp"

#include <fmt/format.h>
#include <libpq-fe.h>

#include <charconv>
#include <cstdlib>

// libpq's PGconn and PGresult are the structs pg_conn and pg_result that connection.hpp
// forward-declares, so no cast is needed between the two spellings.

namespace troupe::storage {

namespace {

PGresult* raw(pg_result* r) {
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

namespace detail {

std::string trimmed(const char* text) {
  return trim(text ? std::string(text) : std::string());
}

result checked(pg_conn* conn, pg_result* r, std::string_view label) {
  result out(r);
  auto status = r ? PQresultStatus(r) : PGRES_FATAL_ERROR;
  if (status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK)
    throw_error(conn, r, label);
  return out;
}

} // namespace detail

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

void throw_error(pg_conn* conn, pg_result* res, std::string_view label) {
  std::string sqlstate;
  std::string msg;
  if (res) {
    if (const char* s = PQresultErrorField(raw(res), PG_DIAG_SQLSTATE))
      sqlstate = s;
    msg = trim(PQresultErrorMessage(raw(res)));
  }
  if (msg.empty() && conn)
    msg = trim(PQerrorMessage(conn));
  bool bad = conn == nullptr || PQstatus(conn) != CONNECTION_OK;
  auto code = classify(sqlstate, bad);
  throw error(code,
              fmt::format("{} failed{}: {}", label,
                          sqlstate.empty() ? std::string() : " [" + sqlstate + "]", msg),
              sqlstate);
}

} // namespace troupe::storage
