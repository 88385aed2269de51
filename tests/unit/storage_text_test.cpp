#define CAF_SUITE storage_text
#include <caf/test/unit_test.hpp>

#include "actors/notify_listener.hpp"
#include "storage/connection.hpp"
#include "storage/embedded_sql.hpp"
#include "storage/migrations.hpp"
#include "storage/statements.hpp"
#include "troupe/error.hpp"

using namespace troupe;

CAF_TEST(every statement renders for an area without leftover placeholders) {
  storage::statement_set set{area{"app", "jobs_"}};
  const auto& all = storage::embedded::statements();
  CAF_REQUIRE_EQUAL(all.size(), storage::statement_count);
  for (std::size_t i = 0; i < all.size(); ++i) {
    const auto& s = set.get(static_cast<storage::statement_id>(i));
    CAF_CHECK_EQUAL(s.name, all[i].name); // the generated ids follow the embedded order
    CAF_CHECK(s.text.find("{{") == std::string::npos);
    CAF_CHECK(s.text.find(';') == std::string::npos); // one statement each
  }
  CAF_CHECK(set.get(storage::sql::claim_batch).text.find("\"app\".\"jobs_queue\"") !=
            std::string::npos);
}

CAF_TEST(the migration script covers every migration for the area) {
  auto script = storage::migration_script(area{"app", "jobs_"}, 0);
  CAF_CHECK(script.find("CREATE TABLE IF NOT EXISTS \"app\".\"jobs_queue\"") != std::string::npos);
  CAF_CHECK(script.find("\"app\".\"jobs_versions\"") != std::string::npos);
  CAF_CHECK(script.find("{{") == std::string::npos);
  auto none = storage::migration_script(area{}, storage::latest_migration());
  CAF_CHECK(none.find("-- migration") == std::string::npos);
}

CAF_TEST(invalid areas are refused before any SQL is rendered) {
  try {
    storage::statement_set set{area{"bad schema", ""}};
    CAF_FAIL("rendered SQL for an invalid schema");
  } catch (const error& e) {
    CAF_CHECK(e.code() == errc::invalid_argument);
  }
}

CAF_TEST(array literals round trip) {
  std::vector<std::string> items{"a", "b c", "q\"uote", "back\\slash", ""};
  auto lit = storage::array_literal(items);
  CAF_CHECK_EQUAL(storage::parse_array_literal(lit), items);
  CAF_CHECK_EQUAL(storage::parse_array_literal("{x,y}"), (std::vector<std::string>{"x", "y"}));
  CAF_CHECK(storage::parse_array_literal("{}").empty());
}

CAF_TEST(a notification payload is only a hint naming a queue) {
  std::string q;
  CAF_CHECK(actors::parse_wake_payload("emails", q));
  CAF_CHECK_EQUAL(q, "emails");
  for (const char* bad : {"", "{\"message_id\":\"x\"}", "Bad Queue", "NULL", "[1]", "*"})
    CAF_CHECK(!actors::parse_wake_payload(bad, q));
}
