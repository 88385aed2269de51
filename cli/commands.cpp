#include "cli/commands.hpp"

#include "cli/output.hpp"
#include "troupe/admin.hpp"

#include <iostream>
#include <string>

namespace troupe::cli {

admin open_admin(const command_line& cl) {
  admin_options o;
  o.dsn = cl.dsn;
  o.area = cl.where;
  o.application_name = "troupe-cli";
  o.on_warning = [](const std::string& text) {
    std::cerr << "troupe: warning from PostgreSQL: " << terminal_safe(text) << '\n';
  };
  return admin(std::move(o));
}

namespace {

std::string already_at(const area& a, int version) {
  return describe_area_short(a) + " is already at version " + std::to_string(version) + "\n";
}

std::string upgraded(const area& a, int from, int to) {
  return "upgraded " + describe_area(a) + " from version " + std::to_string(from) + " to " +
         std::to_string(to) + "\n";
}

} // namespace

void run_init(const command_line& cl, std::ostream& out) {
  auto r = open_admin(cl).init();
  if (cl.json)
    out << format_migration_json(cl.where, std::nullopt, r.to_version, r.applied);
  else if (r.applied.empty())
    out << already_at(cl.where, r.to_version);
  else if (r.from_version == 0)
    out << "initialized " << describe_area(cl.where) << " at version " << r.to_version << "\n";
  else
    out << upgraded(cl.where, r.from_version, r.to_version);
}

void run_upgrade(const command_line& cl, std::ostream& out) {
  auto r = open_admin(cl).upgrade();
  if (cl.json)
    out << format_migration_json(cl.where, r.from_version, r.to_version, r.applied);
  else if (r.applied.empty())
    out << already_at(cl.where, r.to_version);
  else
    out << upgraded(cl.where, r.from_version, r.to_version);
}

void run_sql(const command_line& cl, std::ostream& out) {
  if (cl.what == verb::sql_grants) {
    out << admin::grants_sql(cl.where, cl.roles);
    return;
  }
  out << admin::migration_sql(cl.where, cl.what == verb::sql_upgrade ? cl.from_version : 0);
}

void run_stats(const command_line& cl, std::ostream& out) {
  auto area_admin = open_admin(cl);
  if (cl.recount)
    area_admin.recount_stats();
  auto stats = area_admin.stats(cl.queue);
  out << (cl.json ? format_stats_json(stats) : format_stats_text(stats));
}

} // namespace troupe::cli
