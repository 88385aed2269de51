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

namespace {

/// The migrations from `first` to this Troupe's latest, as migrate() reports them.
std::vector<int> versions_from(int first) {
  std::vector<int> out;
  for (int v = first; v <= storage::latest_migration(); ++v)
    out.push_back(v);
  return out;
}

} // namespace

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
  auto old = a.older_area("v2_", 2);
  auto stmts = storage::make_statement_set(old);
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
  CAF_CHECK_EQUAL(storage::migrate(a.sql(), *stmts), versions_from(3));
  // Migration 7 keeps the hash first, with the lowest bit flipped for messages under limits.
  CAF_CHECK(definition().find("(((hashtext(queue_name) # ((options ?| "
                              "'{limits,concurrency_key}'::text[]))::integer)), priority, eta, "
                              "message_id)") != std::string::npos);
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

CAF_TEST(migration 4 quarantines rows no claim could read and then refuses them at insert) {
  testkit::scratch_area a;
  // A second area in the scratch schema, made by migrations 1 to 3 only.
  auto old = a.older_area("v3_", 3);
  auto stmts = storage::make_statement_set(old);
  auto table = fmt::format("{}.v3_queue", storage::quote_identifier(old.schema));
  task_ref<void(int)> job{"job"};
  client producer{client_options{a.dsn(), old}};
  auto good = producer.enqueue(job(1));
  // Rows as a buggy producer or a hand-written fix would leave them.
  a.sql().exec(fmt::format(
    "INSERT INTO {} (message_id, queue_name, task_name, eta, enqueued_at, attempts) VALUES "
    "('00000000-0000-4000-8000-000000000001', 'default', 'job', 'infinity', now(), 0), "
    "('00000000-0000-4000-8000-000000000002', 'default', 'job', now(), '-infinity', 0), "
    "('00000000-0000-4000-8000-000000000003', 'default', 'job', now(), now(), 2147483647)",
    table));
  CAF_CHECK_EQUAL(storage::migrate(a.sql(), *stmts), versions_from(4));
  auto failure = [&](int n) {
    auto r = a.sql().exec(fmt::format("SELECT state::text, error->>'type', error->>'text' FROM {} "
                                      "WHERE message_id = '00000000-0000-4000-8000-00000000000{}'",
                                      table, n));
    return std::string(r.text(0, 0)) + " " + std::string(r.text(0, 1)) + " " +
           std::string(r.text(0, 2));
  };
  auto has = [](const std::string& text, const std::string& part) {
    return text.find(part) != std::string::npos;
  };
  CAF_CHECK(has(failure(1), "failed troupe::bad_row"));
  CAF_CHECK(has(failure(1), "column eta holds infinity"));
  CAF_CHECK(has(failure(2), "column enqueued_at holds -infinity"));
  CAF_CHECK(has(failure(3), "column attempts holds 2147483647"));
  // The good message is claimed through the rest, and the statistics read the whole area.
  storage::node_identity who{"test", "host", 1, {"default"}};
  auto node = storage::register_node(a.sql(), *stmts, who);
  auto claimed = storage::claim_batch(a.sql(), *stmts, "default", node, 10);
  CAF_REQUIRE_EQUAL(claimed.messages.size(), 1u);
  CAF_CHECK_EQUAL(claimed.messages[0].id, good.id);
  // From now on such a row is refused where it is written, naming the rule it breaks.
  auto refused = [&](const std::string& values) {
    try {
      a.sql().exec(fmt::format("INSERT INTO {} (message_id, queue_name, task_name, eta, "
                               "enqueued_at, attempts) VALUES ({})",
                               table, values));
    } catch (const error& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  CAF_CHECK(has(refused("gen_random_uuid(), 'default', 'job', 'infinity', now(), 0"),
                "v3_queue_eta_finite"));
  CAF_CHECK(has(refused("gen_random_uuid(), 'default', 'job', now(), 'infinity', 0"),
                "v3_queue_enqueued_at_finite"));
  CAF_CHECK(has(refused("gen_random_uuid(), 'default', 'job', now(), now(), -1"),
                "v3_queue_attempts_range"));
  CAF_CHECK(
    has(refused("gen_random_uuid(), '', 'job', now(), now(), 0"), "v3_queue_queue_name_length"));
  CAF_CHECK(has(refused("gen_random_uuid(), 'default', repeat('x', 256), now(), now(), 0"),
                "v3_queue_task_name_length"));
  // Running every migration again leaves the area as it is.
  a.sql().exec(storage::migration_script(old, 0));
  CAF_CHECK_EQUAL(storage::current_version(a.sql(), *stmts), storage::latest_migration());
}
