#define CAF_SUITE migrations
#include <caf/test/unit_test.hpp>

#include "scratch_area.hpp"
#include "storage/migrations.hpp"

#include <fmt/format.h>

using namespace troupe;

CAF_TEST(init creates the area at the latest version and is idempotent) {
  testkit::scratch_area a; // runs migrate once
  CAF_CHECK_EQUAL(storage::current_version(a.sql(), a.statements()), storage::latest_migration());
  CAF_CHECK(storage::migrate(a.sql(), a.statements()).empty());
  CAF_CHECK_EQUAL(
    a.scalar(fmt::format("SELECT count(*) FROM {}.versions", quote_identifier(a.where().schema))),
    storage::latest_migration());
  CAF_CHECK_EQUAL(a.scalar(fmt::format("SELECT count(*) FROM {}", a.queue_table())), 0);
}

CAF_TEST(an uninitialized area reports version zero) {
  testkit::scratch_area a;
  area other{a.where().schema + "_none", ""};
  auto stmts = storage::make_statement_set(other);
  CAF_CHECK_EQUAL(storage::current_version(a.sql(), *stmts), 0);
}

CAF_TEST(the printed migration script builds the same area) {
  testkit::scratch_area a;
  area other{a.where().schema + "_sql", "app_"};
  a.sql().exec(storage::migration_script(other, 0));
  auto stmts = storage::make_statement_set(other);
  CAF_CHECK_EQUAL(storage::current_version(a.sql(), *stmts), storage::latest_migration());
  // Running it twice is harmless.
  a.sql().exec(storage::migration_script(other, 0));
  CAF_CHECK(storage::migrate(a.sql(), *stmts).empty());
  a.sql().exec(fmt::format("DROP SCHEMA {} CASCADE", quote_identifier(other.schema)));
}

CAF_TEST(two prefixes share one schema without touching each other) {
  testkit::scratch_area a;
  area second{a.where().schema, "b_"};
  auto stmts = storage::make_statement_set(second);
  CAF_CHECK_EQUAL(storage::migrate(a.sql(), *stmts).size(),
                  std::size_t(storage::latest_migration()));
  CAF_CHECK_EQUAL(
    a.scalar(fmt::format("SELECT count(*) FROM {}.b_queue", quote_identifier(a.where().schema))),
    0);
}
