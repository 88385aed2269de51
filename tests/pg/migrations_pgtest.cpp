#define CAF_SUITE migrations
#include <caf/test/unit_test.hpp>

#include "scratch_area.hpp"
#include "storage/embedded_sql.hpp"
#include "storage/migrations.hpp"
#include "storage/queries.hpp"
#include "troupe/client.hpp"
#include "troupe/task.hpp"

#include <fmt/format.h>

using namespace troupe;

CAF_TEST(init creates the area at the latest version and is idempotent) {
  testkit::scratch_area a; // runs migrate once
  CAF_CHECK_EQUAL(storage::current_version(a.sql(), a.statements()), storage::latest_migration());
  CAF_CHECK(storage::migrate(a.sql(), a.statements()).empty());
  CAF_CHECK_EQUAL(a.scalar(fmt::format("SELECT count(*) FROM {}.versions",
                                       storage::quote_identifier(a.where().schema))),
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
  a.sql().exec(fmt::format("DROP SCHEMA {} CASCADE", storage::quote_identifier(other.schema)));
}

CAF_TEST(two prefixes share one schema without touching each other) {
  testkit::scratch_area a;
  area second{a.where().schema, "b_"};
  auto stmts = storage::make_statement_set(second);
  CAF_CHECK_EQUAL(storage::migrate(a.sql(), *stmts).size(),
                  std::size_t(storage::latest_migration()));
  CAF_CHECK_EQUAL(a.scalar(fmt::format("SELECT count(*) FROM {}.b_queue",
                                       storage::quote_identifier(a.where().schema))),
                  0);
}

CAF_TEST(migration 3 rebuilds the fetch index of an area at version 2 and keeps its messages) {
  testkit::scratch_area a;
  // A second area in the scratch schema, made by migrations 1 and 2 only.
  area old{a.where().schema, "v2_"};
  auto stmts = storage::make_statement_set(old);
  a.sql().run(stmts->get(storage::sql::create_versions_table), {});
  for (const auto& m : storage::embedded::migrations()) {
    if (m.number > 2)
      continue;
    a.sql().exec(storage::render_sql(m.text, old));
    a.sql().run(stmts->get(storage::sql::record_version),
                {std::to_string(m.number), std::string(m.name)});
  }
  CAF_REQUIRE_EQUAL(storage::current_version(a.sql(), *stmts), 2);
  auto index = fmt::format("{}.v2_queue_fetch_idx", storage::quote_identifier(old.schema));
  auto definition = [&] {
    return std::string(
      a.sql().exec(fmt::format("SELECT pg_get_indexdef('{}'::regclass)", index)).text(0, 0));
  };
  CAF_CHECK(definition().find("hashtext") == std::string::npos);
  task_ref<void(int)> job{"job"};
  client producer{client_options{a.dsn(), old}};
  auto first = producer.enqueue(job(1));
  auto second = producer.enqueue(job(2));
  CAF_CHECK_EQUAL(storage::migrate(a.sql(), *stmts), std::vector<int>{3});
  CAF_CHECK(definition().find("(hashtext(queue_name), priority, eta, message_id)") !=
            std::string::npos);
  CAF_CHECK(definition().find("deduplicate_items=off") != std::string::npos);
  // Running every migration again (the printed script from 0) leaves the new index as it is.
  auto file = [&] {
    return a.scalar(fmt::format("SELECT pg_relation_filenode('{}'::regclass)", index));
  };
  auto built = file();
  a.sql().exec(storage::migration_script(old, 0));
  CAF_CHECK_EQUAL(file(), built);
  // The messages published before the upgrade are claimed through it, in order.
  storage::node_identity who{"test", "host", 1, {"default"}};
  auto node = storage::register_node(a.sql(), *stmts, who);
  auto claimed = storage::claim_batch(a.sql(), *stmts, "default", node, 10);
  CAF_REQUIRE_EQUAL(claimed.messages.size(), 2u);
  CAF_CHECK_EQUAL(claimed.messages[0].id, first.id);
  CAF_CHECK_EQUAL(claimed.messages[1].id, second.id);
  // Two rows read faster without an index: the plan shows whether the claim can use it at all.
  a.sql().exec("SET enable_seqscan = off");
  auto text = a.explain(fmt::format("EXECUTE claim_batch('default', {}, 10)", node));
  a.sql().exec("RESET enable_seqscan");
  CAF_CHECK(text.find("Index Scan using v2_queue_fetch_idx") != std::string::npos);
  if (text.find("v2_queue_fetch_idx") == std::string::npos)
    CAF_MESSAGE("plan:\n" << text);
}
