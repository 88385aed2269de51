#include "cli/commands.hpp"

#include "cli/output.hpp"
#include "storage/connection.hpp"
#include "storage/migrations.hpp"
#include "storage/queries.hpp"
#include "storage/statements.hpp"
#include "troupe/error.hpp"

#include <libpq-fe.h>

#include <cstring>
#include <iostream>
#include <string>

namespace troupe::cli {

namespace {

/// How the CLI's sessions show up in pg_stat_activity.
constexpr std::string_view application_name = "troupe-cli";

/// Drops the server's NOTICEs ("schema already exists, skipping": every idempotent migration
/// step says one) and passes WARNINGs on to stderr; libpq would print both.
void receive_notice(void*, const PGresult* res) {
  const char* severity = PQresultErrorField(res, PG_DIAG_SEVERITY_NONLOCALIZED);
  if (severity == nullptr || std::strcmp(severity, "WARNING") != 0)
    return;
  const char* text = PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY);
  std::cerr << "troupe: warning from PostgreSQL: " << (text ? text : "") << '\n';
}

storage::connection connect(const command_line& cl) {
  auto conn = storage::connection::open(cl.dsn, application_name);
  PQsetNoticeReceiver(conn.native(), receive_notice, nullptr);
  return conn;
}

[[noreturn]] void throw_not_initialized(const area& a) {
  throw troupe::error(errc::not_found,
                      describe_area_short(a) + " is not initialized; run troupe init");
}

/// What one migrate call did: the version before, after, and the migrations applied.
struct migration_report {
  int before = 0;
  int after = 0;
  std::vector<int> applied;
};

migration_report migrate_area(const command_line& cl, bool require_initialized) {
  auto stmts = storage::make_statement_set(cl.where);
  auto conn = connect(cl);
  migration_report report;
  report.before = storage::current_version(conn, *stmts);
  if (require_initialized && report.before == 0)
    throw_not_initialized(cl.where);
  report.applied = storage::migrate(conn, *stmts);
  report.after = storage::current_version(conn, *stmts);
  return report;
}

std::string already_at(const area& a, int version) {
  return describe_area_short(a) + " is already at version " + std::to_string(version) + "\n";
}

std::string upgraded(const area& a, int from, int to) {
  return "upgraded " + describe_area(a) + " from version " + std::to_string(from) + " to " +
         std::to_string(to) + "\n";
}

} // namespace

void run_init(const command_line& cl, std::ostream& out) {
  auto r = migrate_area(cl, false);
  if (cl.json)
    out << format_migration_json(cl.where, std::nullopt, r.after, r.applied);
  else if (r.applied.empty())
    out << already_at(cl.where, r.after);
  else if (r.before == 0)
    out << "initialized " << describe_area(cl.where) << " at version " << r.after << "\n";
  else
    out << upgraded(cl.where, r.before, r.after);
}

void run_upgrade(const command_line& cl, std::ostream& out) {
  auto r = migrate_area(cl, true);
  if (cl.json)
    out << format_migration_json(cl.where, r.before, r.after, r.applied);
  else if (r.applied.empty())
    out << already_at(cl.where, r.after);
  else
    out << upgraded(cl.where, r.before, r.after);
}

void run_sql(const command_line& cl, std::ostream& out) {
  out << storage::migration_script(cl.where, cl.what == verb::sql_upgrade ? cl.from_version : 0);
}

void run_stats(const command_line& cl, std::ostream& out) {
  auto stmts = storage::make_statement_set(cl.where);
  auto conn = connect(cl);
  if (storage::current_version(conn, *stmts) == 0)
    throw_not_initialized(cl.where);
  const std::string* only_queue = cl.queue ? &*cl.queue : nullptr;
  auto stats = storage::queue_statistics(conn, *stmts, only_queue);
  out << (cl.json ? format_stats_json(stats) : format_stats_text(stats));
}

} // namespace troupe::cli
