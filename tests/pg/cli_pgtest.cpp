#define CAF_SUITE cli
#include <caf/test/unit_test.hpp>

#include "cli_runner.hpp"
#include "scratch_area.hpp"
#include "storage/embedded_sql.hpp"
#include "storage/migrations.hpp"
#include "troupe/client.hpp"
#include "troupe/dsn.hpp"
#include "troupe/error.hpp"
#include "troupe/task.hpp"
#include "troupe/version.hpp"

#include <fmt/format.h>
#include <sys/wait.h>

#include <cstdio>

using namespace troupe;

namespace {

using testkit::shell_quote;
using testkit::troupe_cli;

bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

task_ref<void(int)> job{"job"};

struct fixture {
  std::string dsn = testkit::test_dsn();
  std::string schema = fmt::format("cli_{}", ::getpid());
  std::string global = fmt::format("--dsn {} --schema {}", shell_quote(dsn), schema);

  ~fixture() {
    try {
      storage::connection::open(dsn, "test").exec("DROP SCHEMA IF EXISTS " + schema + " CASCADE");
    } catch (...) {
    }
  }
};

} // namespace

CAF_TEST_FIXTURE_SCOPE(cli_tests, fixture)

CAF_TEST(init creates the area once and upgrade finds nothing to do) {
  auto up = troupe_cli(global + " upgrade");
  CAF_CHECK_EQUAL(up.status, 1);
  CAF_CHECK(has(up.out, "not initialized"));
  auto first = troupe_cli(global + " init --json");
  CAF_CHECK_EQUAL(first.status, 0);
  CAF_CHECK(has(first.out, fmt::format("\"version\":{}", storage::latest_migration())));
  CAF_CHECK(has(first.out, "\"applied\":[1"));
  auto second = troupe_cli(global + " init");
  CAF_CHECK_EQUAL(second.status, 0);
  CAF_CHECK(has(second.out, "already at version"));
  CAF_CHECK_EQUAL(troupe_cli(global + " upgrade").status, 0);
}

CAF_TEST(upgrade brings an area made by version 1 up to date and keeps its messages) {
  // The area as the first release left it: migration 1 only.
  area where{schema};
  auto stmts = storage::make_statement_set(where);
  auto conn = storage::connection::open(dsn, "test");
  const auto& first = storage::embedded::migrations().front();
  CAF_REQUIRE_EQUAL(first.number, 1);
  conn.exec("CREATE SCHEMA " + schema);
  conn.run(stmts->get(storage::sql::create_versions_table), {});
  conn.exec(storage::render_sql(first.text, where));
  conn.run(stmts->get(storage::sql::record_version), {"1", std::string(first.name)});
  client producer{client_options{dsn, where}};
  auto kept = producer.enqueue(job(1));
  // Deduplication needs migration 2: refused with the database's error until the upgrade.
  try {
    producer.enqueue(job(2), enqueue_options::deduplicated("k", std::chrono::seconds(60)));
    CAF_FAIL("a deduplicated publish worked on an area without the deduplication table");
  } catch (const error&) {
  }
  auto up = troupe_cli(global + " upgrade --json");
  CAF_CHECK_EQUAL(up.status, 0);
  std::string applied = "\"applied\":[2";
  for (int v = 3; v <= storage::latest_migration(); ++v)
    applied += "," + std::to_string(v);
  CAF_CHECK(has(up.out, applied + "]"));
  CAF_CHECK_EQUAL(storage::current_version(conn, *stmts), storage::latest_migration());
  auto m = producer.enqueue(job(3), enqueue_options::deduplicated("k", std::chrono::seconds(60)));
  CAF_CHECK_EQUAL(
    producer.enqueue(job(4), enqueue_options::deduplicated("k", std::chrono::seconds(60))).id,
    m.id);
  auto res = conn.exec(
    fmt::format("SELECT count(*) FROM {}.queue WHERE message_id = '{}'", schema, kept.id));
  CAF_CHECK_EQUAL(res.int64(0, 0), 1);
}

CAF_TEST(stats counts messages per queue and state) {
  CAF_REQUIRE_EQUAL(troupe_cli(global + " init").status, 0);
  client producer{client_options{dsn, area{schema, ""}}};
  for (int i = 0; i < 3; ++i)
    producer.enqueue(job(i));
  producer.enqueue(job(9).on_queue("later").with_delay(std::chrono::hours(1)));
  auto text = troupe_cli(global + " stats");
  CAF_CHECK_EQUAL(text.status, 0);
  CAF_CHECK(has(text.out, "queue default"));
  CAF_CHECK(has(text.out, "queued: 3"));
  auto json = troupe_cli(global + " stats --json --queue later");
  CAF_CHECK_EQUAL(json.status, 0);
  CAF_CHECK(has(json.out, R"("queue":"later")"));
  CAF_CHECK(has(json.out, R"("scheduled":1)"));
  CAF_CHECK(has(json.out, R"("ready":0)"));
  auto empty = troupe_cli(global + " stats --json --queue nothing_here");
  CAF_CHECK(has(empty.out, R"("queued":0)"));
}

CAF_TEST(text stats escape control characters in queue names) {
  CAF_REQUIRE_EQUAL(troupe_cli(global + " init").status, 0);
  // A row written by plain SQL, whose queue name would forge a block and clear the screen.
  storage::connection::open(dsn, "test")
    .exec(fmt::format("INSERT INTO {}.queue (message_id, queue_name, task_name) VALUES "
                      "(gen_random_uuid(), E'evil\\nqueue forged\\n  done: 99\\x1b[2J', 'job')",
                      schema));
  auto text = troupe_cli(global + " stats");
  CAF_CHECK_EQUAL(text.status, 0);
  CAF_CHECK(has(text.out, "queue evil\\nqueue forged\\n  done: 99\\x1b[2J\n"));
  CAF_CHECK(!has(text.out, "\nqueue forged"));
  CAF_CHECK(!has(text.out, "\x1b"));
  auto json = troupe_cli(global + " stats --json");
  CAF_CHECK(has(json.out, R"("queue":"evil\nqueue forged\n  done: 99\u001b[2J")"));
}

CAF_TEST(bad input is refused with exit code 2 naming what was wrong) {
  auto bad_schema = troupe_cli("--schema 'Bad-Schema' init");
  CAF_CHECK_EQUAL(bad_schema.status, 2);
  CAF_CHECK(has(bad_schema.out, "Bad-Schema"));
  auto bad_queue = troupe_cli(global + " stats --queue 'No Such'");
  CAF_CHECK_EQUAL(bad_queue.status, 2);
  CAF_CHECK(has(bad_queue.out, "\"No Such\""));
  auto verb = troupe_cli("frobnicate");
  CAF_CHECK_EQUAL(verb.status, 2);
  auto from = troupe_cli("sql upgrade");
  CAF_CHECK_EQUAL(from.status, 2);
}

CAF_TEST(a password in the DSN never appears in an error) {
  auto r = troupe_cli("--dsn 'host=/nonexistent port=1 user=u password=s3cr3t' init");
  CAF_CHECK_EQUAL(r.status, 1);
  CAF_CHECK(!has(r.out, "s3cr3t"));
  CAF_CHECK(has(r.out, "password=***"));
}

CAF_TEST(the command checks a DSN by the rule every part of Troupe uses) {
  // Malformed: refused before any connection, with exit code 2, quoting no password.
  auto malformed = troupe_cli("--dsn 'host=db port' stats");
  CAF_CHECK_EQUAL(malformed.status, 2);
  CAF_CHECK(has(malformed.out, "invalid PostgreSQL connection string"));
  auto secret = troupe_cli("--dsn 'postgresql://app:s3cr%zzet@db/x' stats");
  CAF_CHECK_EQUAL(secret.status, 2);
  CAF_CHECK(!has(secret.out, "s3cr"));
  // A bare word is a database name, as libpq takes it: accepted, and then not reachable here.
  auto name = troupe_cli("--dsn 'troupe_no_such_database' stats");
  CAF_CHECK_EQUAL(name.status, 1);
  CAF_CHECK(has(name.out, "cannot connect"));
  // With libpq's environment pointing at the server, a bare database name is all it takes.
  auto env =
    fmt::format("PGHOST={} PGPORT={} PGUSER={} ", shell_quote(dsn_option(dsn, "host").value_or("")),
                shell_quote(dsn_option(dsn, "port").value_or("5432")),
                shell_quote(dsn_option(dsn, "user").value_or("postgres")));
  auto db = dsn_option(dsn, "dbname").value_or("postgres");
  auto bare = troupe_cli("--dsn " + shell_quote(db) + " --schema " + schema + " init", env);
  CAF_CHECK_EQUAL(bare.status, 0);
  if (bare.status != 0)
    CAF_MESSAGE(bare.out);
}

CAF_TEST(version prints the version of the build) {
  auto v = troupe_cli("--version");
  CAF_CHECK_EQUAL(v.status, 0);
  CAF_CHECK_EQUAL(v.out, std::string("troupe ") + version_string + "\n");
  CAF_CHECK_EQUAL(troupe_cli("version").out, v.out);
}

CAF_TEST(sql prints a migration script that builds the area) {
  auto script = troupe_cli("--schema " + schema + " sql init");
  CAF_CHECK_EQUAL(script.status, 0);
  auto conn = storage::connection::open(dsn, "test");
  conn.exec(script.out);
  auto stmts = storage::make_statement_set(area{schema, ""});
  CAF_CHECK_EQUAL(storage::current_version(conn, *stmts), storage::latest_migration());
  auto none = troupe_cli(
    fmt::format("--schema {} sql upgrade --from {}", schema, storage::latest_migration()));
  CAF_CHECK_EQUAL(none.status, 0);
  CAF_CHECK(!has(none.out, "-- migration"));
}

CAF_TEST_FIXTURE_SCOPE_END()
