// The queue table's statements: enqueue, claims (both forms), the eta, completions.
#define CAF_SUITE queue
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

CAF_TEST_FIXTURE_SCOPE(queue_tests, fixture)

CAF_TEST(enqueue claim complete) {
  auto m = producer.enqueue(job(1));
  CAF_CHECK_EQUAL(count("state = 'queued'"), 1);
  auto n = node(area.sql());
  auto claimed = storage::claim_batch(area.sql(), area.statements(), "default", n, 10);
  CAF_REQUIRE_EQUAL(claimed.messages.size(), 1u);
  auto& c = claimed.messages[0];
  CAF_CHECK_EQUAL(c.id, m.id);
  CAF_CHECK_EQUAL(c.task, "job");
  CAF_CHECK_EQUAL(c.args_json, "[1]");
  CAF_CHECK_EQUAL(c.attempt, 1);
  CAF_CHECK_EQUAL(c.enqueued_at_ms, m.timestamp_ms); // the message timestamp, to the millisecond
  CAF_CHECK_EQUAL(count("state = 'running' AND owner_node IS NOT NULL"), 1);
  storage::outcome o{c.id, c.attempt, storage::outcome_state::done, "42", "", 0, {}};
  CAF_CHECK_EQUAL(storage::complete_batch(area.sql(), area.statements(), n, {o}), 1);
  CAF_CHECK_EQUAL(count("state = 'done' AND result = '42' AND finished_at IS NOT NULL "
                        "AND owner_node IS NULL"),
                  1);
  CAF_CHECK(storage::claim_batch(area.sql(), area.statements(), "default", n, 10).messages.empty());
}

CAF_TEST(completions on a new area find their rows without rescanning the outcomes) {
  // Statistics taken while a backlog waited (as autovacuum does after a bulk insert) say no row
  // is running. A plan that scans the node's running rows costs more as the node holds more,
  // and one that rescans the outcomes for each of them is quadratic (300 ms for 500
  // outcomes). The outcomes must be read once, and the rows found by their ids.
  for (int b = 0; b < 20; ++b) {
    std::vector<message> batch;
    for (int i = 0; i < 1000; ++i)
      batch.push_back(job(i));
    producer.enqueue_many(batch);
  }
  area.sql().exec("ANALYZE " + area.queue_table());
  auto n = node(area.sql());
  auto claimed = storage::claim_batch(area.sql(), area.statements(), "default", n, 1600);
  CAF_REQUIRE_EQUAL(claimed.messages.size(), 1600u);
  std::vector<std::string> ids, attempts, states, retry;
  std::vector<std::optional<std::string>> nulls;
  for (std::size_t i = 0; i < 500; ++i) {
    ids.push_back(claimed.messages[i * 3].id);
    attempts.push_back(std::to_string(claimed.messages[i * 3].attempt));
    states.push_back("done");
    retry.push_back("0");
    nulls.push_back(std::nullopt);
  }
  const auto& st = area.statements().get(storage::sql::complete_batch);
  auto plan = area.sql().exec_params(
    "EXPLAIN (ANALYZE, FORMAT JSON) " + st.text,
    {std::to_string(n), storage::array_literal(ids), storage::array_literal(attempts),
     storage::array_literal(states), storage::array_literal(nulls), storage::array_literal(nulls),
     storage::array_literal(retry), storage::results_channel(area.where()),
     storage::array_literal(retry), storage::array_literal(nulls), storage::array_literal(retry)},
    "explain complete_batch");
  std::string text(plan.text(0, 0));
  auto scan = text.find("\"Function Scan\"");
  CAF_REQUIRE(scan != std::string::npos);
  auto loops = text.find("\"Actual Loops\": ", scan);
  CAF_REQUIRE(loops != std::string::npos);
  CAF_CHECK_EQUAL(std::atoi(text.c_str() + loops + 16), 1);
  CAF_CHECK(text.find("running_idx") == std::string::npos);
  CAF_CHECK_EQUAL(count("state = 'done'"), 500);
}

CAF_TEST(a claim takes at most the free slots asked for) {
  std::vector<message> batch;
  for (int i = 0; i < 25; ++i)
    batch.push_back(job(i));
  producer.enqueue_many(batch);
  auto n = node(area.sql());
  CAF_CHECK_EQUAL(
    storage::claim_batch(area.sql(), area.statements(), "default", n, 10).messages.size(), 10u);
  CAF_CHECK_EQUAL(count("state = 'running'"), 10);
  CAF_CHECK_EQUAL(count("state = 'queued'"), 15);
}

CAF_TEST(priority orders the whole queue and then enqueue order) {
  std::vector<std::string> ids;
  for (int p : {5, 0, -3, 0, 5, -3}) {
    auto m = producer.enqueue(job(p).with_priority(p));
    ids.push_back(m.id);
  }
  auto n = node(area.sql());
  std::vector<std::string> order;
  for (int i = 0; i < 6; ++i) {
    auto c = storage::claim_batch(area.sql(), area.statements(), "default", n, 1);
    CAF_REQUIRE_EQUAL(c.messages.size(), 1u);
    order.push_back(c.messages[0].id);
  }
  CAF_CHECK_EQUAL(order,
                  (std::vector<std::string>{ids[2], ids[5], ids[1], ids[3], ids[0], ids[4]}));
}

CAF_TEST(a delayed message is not claimed before its eta and its eta is reported) {
  producer.enqueue(job(1).with_delay(1500ms));
  auto n = node(area.sql());
  auto c = storage::claim_batch(area.sql(), area.statements(), "default", n, 10);
  CAF_CHECK(c.messages.empty());
  CAF_CHECK(c.next_eta_ms > 1000 && c.next_eta_ms <= 1500);
  CAF_CHECK(testkit::wait_until(
    [&] {
      return !storage::claim_batch(area.sql(), area.statements(), "default", n, 10)
                .messages.empty();
    },
    5s));
  // Claimed once due, and not started: its node writes the start.
  CAF_CHECK_EQUAL(
    count("state = 'running' AND started_at IS NULL AND now() >= enqueued_at + interval '1.4 s'"),
    1);
}

CAF_TEST(two nodes never claim the same message) {
  std::vector<message> batch;
  for (int i = 0; i < 1000; ++i)
    batch.push_back(job(i));
  producer.enqueue_many(batch);
  std::vector<std::string> seen[2];
  std::vector<std::thread> nodes;
  for (int t = 0; t < 2; ++t)
    nodes.emplace_back([&, t] {
      auto conn = storage::connection::open(area.dsn(), "claimer");
      auto id = storage::register_node(conn, area.statements(), who);
      for (;;) {
        auto c = storage::claim_batch(conn, area.statements(), "default", id, 7);
        if (c.messages.empty())
          break;
        for (auto& m : c.messages)
          seen[t].push_back(m.id);
      }
    });
  for (auto& th : nodes)
    th.join();
  std::set<std::string> all(seen[0].begin(), seen[0].end());
  all.insert(seen[1].begin(), seen[1].end());
  CAF_CHECK_EQUAL(seen[0].size() + seen[1].size(), 1000u);
  CAF_CHECK_EQUAL(all.size(), 1000u);
  CAF_CHECK_EQUAL(count("state = 'running' AND attempts = 1"), 1000);
}

CAF_TEST(a claim in two steps hands out locked rows before it marks them running) {
  std::vector<message> batch;
  for (int i = 0; i < 5; ++i)
    batch.push_back(job(i));
  producer.enqueue_many(batch);
  auto claimer = storage::connection::open(area.dsn(), "claimer");
  auto id = node(claimer);
  std::vector<storage::claimed_message> got;
  std::size_t other_claim = 99;
  std::int64_t running_while_locked = -1;
  auto res = storage::claim_batch_early(claimer, area.statements(), "default", id, 3, 1, 0,
                                        [&](std::vector<storage::claimed_message> m) {
                                          got = std::move(m);
                                          // Locked, not yet written: still queued, and another
                                          // claim skips them.
                                          running_while_locked = count("state = 'running'");
                                          other_claim =
                                            storage::claim_batch(area.sql(), area.statements(),
                                                                 "default", node(area.sql()), 10)
                                              .messages.size();
                                        });
  CAF_CHECK(res.messages.empty());
  CAF_REQUIRE_EQUAL(got.size(), 3u);
  CAF_CHECK_EQUAL(running_while_locked, 0);
  CAF_CHECK_EQUAL(other_claim, 2u);
  for (std::size_t i = 0; i < got.size(); ++i) {
    CAF_CHECK_EQUAL(got[i].id, batch[i].id); // claim order
    CAF_CHECK_EQUAL(got[i].attempt, 1);
    CAF_CHECK_EQUAL(got[i].args_json, fmt::format("[{}]", i));
    CAF_CHECK_EQUAL(got[i].enqueued_at_ms, batch[i].timestamp_ms);
  }
  CAF_CHECK_EQUAL(count(fmt::format("state = 'running' AND owner_node = {} AND attempts = 1", id)),
                  3);
  // An outcome written now is accepted.
  storage::outcome o{got[0].id, 1, storage::outcome_state::done, "7", "", 0, {}};
  CAF_CHECK_EQUAL(storage::complete_batch(area.sql(), area.statements(), id, {o}), 1);
  // Nothing ready: nothing handed out, the transaction ended, and the eta asked for.
  bool called = false;
  auto none =
    storage::claim_batch_early(claimer, area.statements(), "default", id, 3, 1, 0,
                               [&](std::vector<storage::claimed_message>) { called = true; });
  CAF_CHECK(!called);
  CAF_CHECK_EQUAL(none.next_eta_ms, -1);
  CAF_CHECK_EQUAL(claimer.exec("SELECT 1").rows(), 1);
}

CAF_TEST(a claim in two steps walks the fetch index in claim order without sorting) {
  // Many ready rows share a priority and an eta (one publishing transaction): a claim must
  // read only the rows it takes, never sort the whole group.
  std::vector<message> batch;
  for (int i = 0; i < 1000; ++i)
    batch.push_back(job(i));
  producer.enqueue_many(batch);
  area.sql().exec("ANALYZE " + area.queue_table());
  auto id = node(area.sql());
  std::vector<storage::claimed_message> got;
  storage::claim_batch_early(area.sql(), area.statements(), "default", id, 10, 1, 0,
                             [&](std::vector<storage::claimed_message> m) { got = std::move(m); });
  CAF_REQUIRE_EQUAL(got.size(), 10u);
  for (std::size_t i = 0; i < got.size(); ++i)
    CAF_CHECK_EQUAL(got[i].id, batch[i].id);
  auto text = area.explain("EXECUTE claim_lock('default', 10)");
  CAF_CHECK(text.find("queue_fetch_idx") != std::string::npos);
  CAF_CHECK(text.find("Index Cond: ") != std::string::npos &&
            text.find("hashtext(queue_name) # ((options ?| ") != std::string::npos);
  CAF_CHECK(text.find("Sort") == std::string::npos);
  if (text.find("Sort") != std::string::npos)
    CAF_MESSAGE("plan:\n" << text);
}

CAF_TEST(the eta probe walks the fetch index) {
  // The probe must find the earliest delayed message of a queue from the index, never by
  // reading the backlog of ready rows in front of it.
  std::vector<message> batch;
  for (int i = 0; i < 1000; ++i)
    batch.push_back(job(i));
  producer.enqueue_many(batch);
  producer.enqueue(job(-1).with_delay(30s));
  area.sql().exec("ANALYZE " + area.queue_table());
  auto id = node(area.sql());
  auto eta = storage::claim_batch(area.sql(), area.statements(), "default", id, 0, 1).next_eta_ms;
  CAF_CHECK(eta > 25'000 && eta <= 30'000);
  auto text = area.explain("EXECUTE next_eta('default')");
  CAF_CHECK(text.find("queue_fetch_idx") != std::string::npos);
  CAF_CHECK(text.find("Index Cond: ") != std::string::npos &&
            text.find("hashtext(queue_name) # ((options ?| ") != std::string::npos);
  CAF_CHECK(text.find("Seq Scan") == std::string::npos);
  if (text.find("Seq Scan") != std::string::npos)
    CAF_MESSAGE("plan:\n" << text);
}

CAF_TEST(queues whose names hash alike each claim only their own messages) {
  // The fetch index leads with a hash of the queue name: two queues with the same hash share a
  // range of it, and a claim or an eta probe of one must skip the other's rows.
  auto pair = area.sql().exec(
    "SELECT min(name), max(name) FROM (SELECT 'q' || i AS name FROM generate_series(1, 400000) i)"
    " s GROUP BY hashtext(name) HAVING count(*) > 1 ORDER BY 1 LIMIT 1");
  CAF_REQUIRE_EQUAL(pair.rows(), 1);
  std::string mine{pair.text(0, 0)};
  std::string other{pair.text(0, 1)};
  CAF_MESSAGE("queues " << mine << " and " << other << " share a hash");
  // The other queue's messages come first in the shared range: a lower priority, an earlier eta.
  for (int i = 0; i < 3; ++i)
    producer.enqueue(job(i).on_queue(other).with_priority(-1));
  producer.enqueue(job(3).on_queue(other).with_delay(10s)); // due well before mine, never here
  auto ready = producer.enqueue(job(4).on_queue(mine));
  producer.enqueue(job(5).on_queue(mine).with_delay(30s));
  auto id = node(area.sql());
  std::vector<storage::claimed_message> got;
  auto claim = storage::claim_batch_early(
    area.sql(), area.statements(), mine, id, 10, 10, 0,
    [&](std::vector<storage::claimed_message> m) { got = std::move(m); });
  CAF_REQUIRE_EQUAL(got.size(), 1u);
  CAF_CHECK_EQUAL(got[0].id, ready.id);
  CAF_CHECK(claim.next_eta_ms > 25'000 && claim.next_eta_ms <= 30'000);
  auto again = storage::claim_batch(area.sql(), area.statements(), mine, id, 10, 1);
  CAF_CHECK(again.messages.empty());
  CAF_CHECK(again.next_eta_ms > 25'000 && again.next_eta_ms <= 30'000);
  CAF_CHECK_EQUAL(count(fmt::format("queue_name = '{}' AND state = 'queued'", other)), 4);
  CAF_CHECK_EQUAL(
    storage::claim_batch(area.sql(), area.statements(), other, id, 10).messages.size(), 3u);
}

CAF_TEST(a claim in two steps whose marking fails leaves its rows queued and unlocked) {
  producer.enqueue(job(1));
  producer.enqueue(job(2));
  area.sql().exec(fmt::format(R"(
    CREATE FUNCTION {0}.refuse_claims() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN RAISE EXCEPTION 'no claims today'; END $$;
    CREATE TRIGGER refuse_claims BEFORE UPDATE ON {1} FOR EACH ROW
      WHEN (NEW.state = 'running') EXECUTE FUNCTION {0}.refuse_claims())",
                              storage::quote_identifier(area.where().schema), area.queue_table()));
  auto claimer = storage::connection::open(area.dsn(), "claimer");
  auto id = node(claimer);
  std::size_t handed_out = 0;
  try {
    storage::claim_batch_early(
      claimer, area.statements(), "default", id, 10, 1, 0,
      [&](std::vector<storage::claimed_message> m) { handed_out = m.size(); });
    CAF_FAIL("the claim did not fail");
  } catch (const error& e) {
    CAF_CHECK(std::string(e.what()).find("no claims today") != std::string::npos);
    CAF_CHECK(std::string(e.what()).find("claim_mark") != std::string::npos);
  }
  CAF_CHECK_EQUAL(handed_out, 2u);
  CAF_CHECK_EQUAL(count("state = 'queued' AND attempts = 0 AND owner_node IS NULL"), 2);
  // The transaction was rolled back: the rows are free, and the connection works.
  area.sql().exec("DROP TRIGGER refuse_claims ON " + area.queue_table());
  CAF_CHECK_EQUAL(
    storage::claim_batch(area.sql(), area.statements(), "default", node(area.sql()), 10)
      .messages.size(),
    2u);
  CAF_CHECK_EQUAL(claimer.exec("SELECT 1").rows(), 1);
}

CAF_TEST(a completion for a delivery the node no longer owns is refused) {
  producer.enqueue(job(1));
  auto n = node(area.sql());
  auto c = storage::claim_batch(area.sql(), area.statements(), "default", n, 1).messages.at(0);
  storage::outcome stale{c.id, c.attempt + 1, storage::outcome_state::done, "1", "", 0, {}};
  CAF_CHECK_EQUAL(storage::complete_batch(area.sql(), area.statements(), n, {stale}), 0);
  storage::outcome other_node{c.id, c.attempt, storage::outcome_state::done, "1", "", 0, {}};
  CAF_CHECK_EQUAL(storage::complete_batch(area.sql(), area.statements(), n + 1000, {other_node}),
                  0);
  CAF_CHECK_EQUAL(count("state = 'running'"), 1);
  storage::outcome good{c.id, c.attempt, storage::outcome_state::failed, "", R"({"type":"x"})",
                        0,    {}};
  CAF_CHECK_EQUAL(storage::complete_batch(area.sql(), area.statements(), n, {good}), 1);
  CAF_CHECK_EQUAL(count("state = 'failed' AND error->>'type' = 'x'"), 1);
}

CAF_TEST(a retry outcome puts the message back with a later eta) {
  producer.enqueue(job(1));
  auto n = node(area.sql());
  auto c = storage::claim_batch(area.sql(), area.statements(), "default", n, 1).messages.at(0);
  storage::outcome retry{c.id,  c.attempt, storage::outcome_state::retry, "", R"({"type":"x"})",
                         60000, {}};
  CAF_CHECK_EQUAL(storage::complete_batch(area.sql(), area.statements(), n, {retry}), 1);
  CAF_CHECK_EQUAL(count("state = 'queued' AND eta > now() + interval '50 s' AND attempts = 1"), 1);
}

CAF_TEST_FIXTURE_SCOPE_END()
