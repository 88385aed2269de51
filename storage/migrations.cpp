#include "storage/migrations.hpp"

#include "storage/embedded_sql.hpp"
#include "storage/naming.hpp"
#include "storage/statements.hpp"
#include "troupe/error.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace troupe::storage {

namespace {

std::string versions_table_name(const area& a) {
  return quote_identifier(a.schema) + "." + quote_identifier(a.prefix + "versions");
}

std::string trim_trailing(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' '))
    s.pop_back();
  return s;
}

std::string quote_literal(std::string_view s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'')
      out.push_back('\'');
    out.push_back(c);
  }
  out.push_back('\'');
  return out;
}

} // namespace

int latest_migration() {
  const auto& all = embedded::migrations();
  return all.empty() ? 0 : all.back().number;
}

int current_version(connection& conn, const statement_set& stmts) {
  auto exists = conn.run(stmts.get(sql::area_exists), {versions_table_name(stmts.where())});
  if (exists.is_null(0, 0))
    return 0;
  auto res = conn.run(stmts.get(sql::applied_versions), {});
  return res.rows() == 0 ? 0 : static_cast<int>(res.int64(res.rows() - 1, 0));
}

void follow_area_version(connection& conn, const statement_set& stmts) {
  auto v = current_version(conn, stmts);
  if (v == 0)
    v = latest_migration();
  stmts.use_version(std::clamp(v, oldest_node_version, latest_migration()));
}

std::vector<int> migrate(connection& conn, const statement_set& stmts) {
  std::vector<int> applied;
  for (const auto& m : embedded::migrations()) {
    conn.exec("BEGIN", "migrate");
    try {
      conn.run(stmts.get(sql::migration_lock), {});
      conn.exec(
        fmt::format("CREATE SCHEMA IF NOT EXISTS {}", quote_identifier(stmts.where().schema)),
        "create_schema");
      conn.run(stmts.get(sql::create_versions_table), {});
      auto done = conn.run(stmts.get(sql::applied_versions), {});
      bool present = false;
      for (int r = 0; r < done.rows(); ++r)
        present = present || done.int64(r, 0) == m.number;
      if (!present) {
        conn.exec(render_sql(m.text, stmts.where()), fmt::format("migration_{:03}", m.number));
        conn.run(stmts.get(sql::record_version), {std::to_string(m.number), std::string(m.name)});
        applied.push_back(m.number);
      }
      conn.exec("COMMIT", "migrate");
    } catch (...) {
      if (conn.ok())
        conn.exec("ROLLBACK", "migrate");
      throw;
    }
  }
  return applied;
}

std::string migration_script(const area& a, int from_version) {
  validate_area(a);
  auto latest = latest_migration();
  std::string out =
    from_version >= latest
      ? fmt::format("-- Troupe: schema {}, table prefix \"{}\" at version {} needs no migration\n",
                    a.schema, a.prefix, from_version)
      : fmt::format("-- Troupe migrations {}..{} for schema {}, table prefix \"{}\"\n",
                    from_version + 1, latest, a.schema, a.prefix);
  statement_set stmts(a);
  auto statement = [&](statement_id id) { return trim_trailing(stmts.get(id).text) + ";\n"; };
  out += "BEGIN;\n";
  out += statement(sql::migration_lock);
  out += fmt::format("CREATE SCHEMA IF NOT EXISTS {};\n", quote_identifier(a.schema));
  out += statement(sql::create_versions_table);
  for (const auto& m : embedded::migrations()) {
    if (m.number <= from_version)
      continue;
    out += fmt::format("\n-- migration {:03}_{}\n", m.number, m.name);
    out += render_sql(m.text, a);
    out += fmt::format("INSERT INTO {} (version, name) VALUES ({}, {}) ON CONFLICT DO NOTHING;\n",
                       versions_table_name(a), m.number, quote_literal(m.name));
  }
  out += "COMMIT;\n";
  return out;
}

} // namespace troupe::storage
