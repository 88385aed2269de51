#include "storage/connection.hpp"

#include "storage/naming.hpp"
#include "storage/pq_support.hpp"
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
pg_result* wrap(PGresult* r) {
  return r;
}

result check(pg_conn* conn, PGresult* r, std::string_view label) {
  return detail::checked(conn, wrap(r), label);
}

using detail::param_arrays;

} // namespace

namespace {

// Strips the trailing newline libpq leaves on messages.
std::string message_text(const char* text) {
  return detail::trimmed(text);
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

connection connection::open(const std::string& dsn, std::string_view application_name,
                            std::chrono::milliseconds statement_timeout) {
  validate_dsn(dsn);
  // Defaults first, the DSN after them, so whatever the DSN sets wins. The timeouts and
  // keepalives make a dead server or a half-open connection an error within seconds instead of
  // a call that blocks its actor (and a shutdown) for minutes.
  std::string app(application_name);
  const char* keys[] = {"application_name",    "connect_timeout",  "keepalives", "keepalives_idle",
                        "keepalives_interval", "keepalives_count", "dbname",     nullptr};
  const char* values[] = {app.c_str(), "10", "1", "30", "10", "3", dsn.c_str(), nullptr};
  PGconn* c = PQconnectdbParams(keys, values, 1);
  if (c == nullptr)
    throw error(errc::connection_lost, "cannot allocate a PostgreSQL connection");
  if (PQstatus(c) != CONNECTION_OK) {
    auto msg = detail::trimmed(PQerrorMessage(c));
    PQfinish(c);
    throw error(errc::connection_lost,
                fmt::format("cannot connect to PostgreSQL ({}): {}", redact_dsn(dsn), msg));
  }
  connection out(c);
  // Custom plans always: a generic plan built while a table is empty can stay on a bad join.
  out.exec("SET plan_cache_mode = force_custom_plan", "session_setup");
  // A SET after the start, not a startup option: connection poolers refuse startup options
  // they do not know.
  if (statement_timeout.count() > 0)
    out.exec(fmt::format("SET statement_timeout = {}", statement_timeout.count()), "session_setup");
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

result connection::run_between(const statement& st, const params& values,
                               std::initializer_list<std::string_view> before,
                               std::string_view after) {
  return std::move(run_pipelined({{&st, &values}}, before, after).front());
}

std::pair<result, result>
connection::run_two_between(const statement& first, const params& first_values,
                            const statement& second, const params& second_values,
                            std::initializer_list<std::string_view> before,
                            std::string_view after) {
  auto out = run_pipelined({{&first, &first_values}, {&second, &second_values}}, before, after);
  return {std::move(out[0]), std::move(out[1])};
}

std::vector<result> connection::run_pipelined(
  std::initializer_list<std::pair<const statement*, const params*>> statements,
  std::initializer_list<std::string_view> before, std::string_view after) {
  for (auto [st, values] : statements)
    prepare(*st);
  const auto& label = statements.begin()->first->name;
  auto* c = raw(conn_.get());
  if (PQenterPipelineMode(c) != 1)
    throw_error(conn_.get(), nullptr, label);
  std::string last(after);
  auto send_plain = [&](const std::string& sql) {
    return sql.empty() ||
           PQsendQueryParams(c, sql.c_str(), 0, nullptr, nullptr, nullptr, nullptr, 0) == 1;
  };
  int own = 0; // the index of the first statement among the queries sent
  bool sent = true;
  for (auto b : before) {
    if (b.empty())
      continue;
    sent = sent && send_plain(std::string(b));
    ++own;
  }
  for (auto [st, values] : statements) {
    param_arrays pa(*values);
    sent = sent && PQsendQueryPrepared(c, st->name.c_str(), static_cast<int>(values->size()),
                                       pa.values.data(), nullptr, nullptr, 0) == 1;
  }
  sent = sent && send_plain(last) && PQpipelineSync(c) == 1;
  if (!sent)
    throw_error(conn_.get(), nullptr, label); // a connection that cannot send is broken
  // Each query's results end with a null; the server skips what follows a failed query up to
  // the sync point, and reports those as aborted.
  int count = static_cast<int>(statements.size());
  int queries = own + count + (last.empty() ? 0 : 1);
  std::vector<result> out(static_cast<std::size_t>(count));
  PGresult* failed = nullptr;
  int failed_at = 0;
  for (int q = 0; q < queries && PQstatus(c) == CONNECTION_OK; ++q) {
    while (PGresult* r = PQgetResult(c)) {
      auto status = PQresultStatus(r);
      if (status == PGRES_FATAL_ERROR && !failed) {
        failed = r;
        failed_at = q;
      } else if (q >= own && q < own + count &&
                 (status == PGRES_TUPLES_OK || status == PGRES_COMMAND_OK)) {
        out[static_cast<std::size_t>(q - own)] = result(wrap(r));
      } else {
        PQclear(r);
      }
    }
  }
  if (PGresult* sync = PQgetResult(c))
    PQclear(sync);
  PQexitPipelineMode(c);
  if (failed) {
    auto at = failed_at - own;
    const auto& name =
      at >= 0 && at < count ? (statements.begin() + at)->first->name : std::string(label);
    check(conn_.get(), failed, name);
  }
  if (PQstatus(c) != CONNECTION_OK)
    throw_error(conn_.get(), nullptr, label);
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

} // namespace troupe::storage
