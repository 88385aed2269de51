// Writes to the queue table beyond the claim: names refused before any SQL, batches, COPY, vacuum.
#define CAF_SUITE queue_writes
#include <caf/test/unit_test.hpp>

#include "queue_fixture.hpp"
#include "storage/operations.hpp"
#include "troupe/error.hpp"

#include <algorithm>
#include <set>
#include <span>
#include <thread>

using namespace troupe;
using namespace std::chrono_literals;

namespace {

using fixture = testkit::queue_fixture;
const auto& job = testkit::queue_job;

} // namespace

CAF_TEST_FIXTURE_SCOPE(queue_writes_tests, fixture)

CAF_TEST(invalid names are refused before any SQL) {
  // The DSN points nowhere: reaching the database would be a connection error instead.
  client offline{client_options{"host=/nonexistent port=1", area.where()}};
  auto m = job(1);
  m.queue = "Not A Queue";
  try {
    offline.enqueue(m);
    CAF_FAIL("enqueued to an invalid queue");
  } catch (const error& e) {
    CAF_CHECK(e.code() == errc::invalid_argument);
    CAF_CHECK(std::string(e.what()).find("\"Not A Queue\"") != std::string::npos);
  }
  try {
    client bad_schema{client_options{area.dsn(), troupe::area{"x;drop", ""}}};
    CAF_FAIL("accepted an invalid schema");
  } catch (const error& e) {
    CAF_CHECK(e.code() == errc::invalid_argument);
  }
}

CAF_TEST(a batch is one transaction and one notification per queue) {
  auto listener = storage::connection::open(area.dsn(), "listener");
  listener.exec("LISTEN " + storage::quote_identifier(storage::wake_channel(area.where())));
  std::vector<message> batch;
  for (int i = 0; i < 50; ++i)
    batch.push_back(job(i).on_queue(i % 2 ? "odd" : "even"));
  producer.enqueue_many(batch);
  CAF_CHECK_EQUAL(count("true"), 50);
  CAF_CHECK_EQUAL(wakes(listener, 2), (std::multiset<std::string>{"even", "odd"}));
}

CAF_TEST(vacuum_queue vacuums only past the dead rows it is given) {
  // Autovacuum must not take the table first (the VACUUM here would then skip it).
  area.sql().exec("ALTER TABLE " + area.queue_table() + " SET (autovacuum_enabled = false)");
  std::vector<message> batch;
  for (int i = 0; i < 200; ++i)
    batch.push_back(job(i));
  producer.enqueue_many(batch);
  auto& conn = area.sql();
  auto n = node(conn);
  // Each claimed and each completed row leaves a dead version behind.
  for (;;) {
    auto claimed = storage::claim_batch(conn, area.statements(), "default", n, 50);
    if (claimed.messages.empty())
      break;
    std::vector<storage::outcome> outs;
    for (auto& c : claimed.messages)
      outs.push_back({c.id, c.attempt, storage::outcome_state::done, "", "", 0, {}});
    storage::complete_batch(conn, area.statements(), n, outs);
  }
  conn.exec("SELECT pg_stat_force_next_flush()");
  conn.exec("SELECT 1"); // a transaction end: this connection's counts reach the statistics
  auto stats = [&](const char* column) {
    return area.scalar(
      fmt::format("SELECT {} FROM pg_stat_user_tables WHERE relid = '{}'::regclass", column,
                  area.queue_table()));
  };
  CAF_REQUIRE(testkit::wait_until([&] { return stats("n_dead_tup") >= 400; }, 10s));
  CAF_CHECK_EQUAL(storage::vacuum_queue(conn, area.statements(), 1'000'000), -1);
  CAF_CHECK_EQUAL(stats("vacuum_count"), 0);
  CAF_CHECK(storage::vacuum_queue(conn, area.statements(), 100) >= 400);
  CAF_CHECK_EQUAL(stats("vacuum_count"), 1);
  // (How many dead versions that VACUUM could remove depends on the oldest snapshot any other
  // session of the cluster holds, a test running beside this one included: not asserted.)
  CAF_CHECK_EQUAL(area.scalar("SHOW statement_timeout"), 0); // the 30 s bound is reset
  // A role that owns neither the table nor the database is told so, and nothing runs.
  auto schema = storage::quote_identifier(area.where().schema);
  // (Roles are the cluster's: the role is named after this test's own schema.)
  auto stranger = storage::quote_identifier(area.where().schema + "_stranger");
  conn.exec("DROP ROLE IF EXISTS " + stranger);
  conn.exec("CREATE ROLE " + stranger);
  conn.exec("GRANT USAGE ON SCHEMA " + schema + " TO " + stranger);
  conn.exec("SET ROLE " + stranger);
  auto refused = storage::vacuum_queue(conn, area.statements(), 0);
  conn.exec("RESET ROLE");
  conn.exec("REVOKE USAGE ON SCHEMA " + schema + " FROM " + stranger);
  conn.exec("DROP ROLE " + stranger);
  CAF_CHECK_EQUAL(refused, storage::vacuum_not_allowed);
  CAF_CHECK_EQUAL(stats("vacuum_count"), 1);
}

CAF_TEST(a COPY in parts writes every part in one transaction) {
  std::vector<message> rows;
  for (int i = 0; i < 9; ++i)
    rows.push_back(job(i));
  std::span<const message> all(rows);
  std::vector<std::string> parts{storage::copy_messages_data(all.first(3)),
                                 storage::copy_messages_data(all.subspan(3, 2)),
                                 storage::copy_messages_data(all.subspan(5))};
  auto& conn = area.sql();
  const auto& copy = area.statements().get(storage::sql::copy_messages);
  // A broken second part: the first is rolled back with it, and the error names the statement.
  auto broken = parts;
  broken[1] = "not a COPY input";
  try {
    conn.copy_in_parts(copy, broken, "BEGIN; ", "; COMMIT");
    CAF_FAIL("a broken part passed for success");
  } catch (const error& e) {
    CAF_CHECK(std::string(e.what()).find("copy_messages") != std::string::npos);
  }
  PQclear(PQexec(reinterpret_cast<PGconn*>(conn.native()), "ROLLBACK"));
  CAF_CHECK_EQUAL(count("true"), 0);
  CAF_CHECK_EQUAL(conn.copy_in_parts(copy, parts, "BEGIN; ", "; COMMIT"), 9);
  CAF_CHECK_EQUAL(count("state = 'queued' AND (args->>0)::int BETWEEN 0 AND 8"), 9);
  // Through the publishing path, a batch of 1,000 goes in parts and arrives whole, in order.
  std::vector<message> batch;
  for (int i = 0; i < 1000; ++i)
    batch.push_back(job(i));
  producer.enqueue_many(batch);
  CAF_CHECK_EQUAL(count("true"), 1009);
  // The batch's transaction came last, so its messages are claimed after the first nine.
  auto claimed =
    storage::claim_batch(area.sql(), area.statements(), "default", node(area.sql()), 1009);
  CAF_REQUIRE_EQUAL(claimed.messages.size(), 1009u);
  for (std::size_t i = 0; i < 1000; ++i)
    CAF_CHECK_EQUAL(claimed.messages[9 + i].id, batch[i].id);
}

CAF_TEST(a COPY whose following statement fails writes nothing and names the failure) {
  // copy_in_parts sends the COPY with what follows it as one query; an error after the COPY
  // (here before the COMMIT) must not pass for success.
  std::vector<message> rows;
  for (int i = 0; i < 3; ++i)
    rows.push_back(job(i));
  auto& conn = area.sql();
  try {
    conn.copy_in_parts(area.statements().get(storage::sql::copy_messages),
                       {storage::copy_messages_data(rows)}, "BEGIN; ", "; SELECT 1 / 0; COMMIT");
    CAF_FAIL("a failed statement after the COPY passed for success");
  } catch (const error& e) {
    CAF_CHECK(e.sqlstate() == "22012"); // division_by_zero
  }
  PQclear(PQexec(reinterpret_cast<PGconn*>(conn.native()), "ROLLBACK"));
  CAF_CHECK(conn.ok());
  CAF_CHECK_EQUAL(count("true"), 0);
  CAF_CHECK_EQUAL(area.scalar("SELECT 7"), 7); // the connection takes the next statement
}

CAF_TEST(a failed batch writes nothing) {
  producer.enqueue(job(1));
  std::vector<message> batch{job(2), job(3)};
  batch[1].id = "not-a-uuid";
  try {
    producer.enqueue_many(batch);
    CAF_FAIL("accepted a message with a bad id");
  } catch (const error& e) {
    CAF_CHECK(e.code() == errc::invalid_argument);
  }
  CAF_CHECK_EQUAL(count("true"), 1);
}

CAF_TEST_FIXTURE_SCOPE_END()
