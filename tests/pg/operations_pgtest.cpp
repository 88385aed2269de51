// Operations through the admin API and the statements under it: pausing queues, cancelling
// messages, failed messages and their retry. What a worker node does about them is in
// node_operations_pgtest.cpp.
#define CAF_SUITE operations
#include <caf/test/unit_test.hpp>

#include "scratch_area.hpp"
#include "storage/embedded_sql.hpp"
#include "storage/migrations.hpp"
#include "storage/operations.hpp"
#include "storage/queries.hpp"
#include "troupe/admin.hpp"
#include "troupe/client.hpp"
#include "troupe/error.hpp"
#include "troupe/task.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <future>
#include <set>
#include <thread>

using namespace troupe;
using namespace std::chrono_literals;

namespace {

task_ref<void(int)> job{"job"};

struct fixture {
  testkit::scratch_area area;
  client producer{client_options{area.dsn(), area.where()}};
  admin ops{admin_options{area.dsn(), area.where()}};
  storage::node_identity who{"test", "host", 1, {"default", "other"}};

  std::int64_t count(const std::string& where) {
    return area.scalar(fmt::format("SELECT count(*) FROM {} WHERE {}", area.queue_table(), where));
  }
  std::int32_t node() { return storage::register_node(area.sql(), area.statements(), who); }
  // Claims through the two-step claim (what nodes run): how many, or the messages.
  std::size_t claim(storage::connection& c, std::int32_t n, const std::string& queue = "default") {
    return claim_all(c, n, queue).size();
  }
  std::vector<storage::claimed_message> claim_all(storage::connection& c, std::int32_t n,
                                                  const std::string& queue = "default") {
    std::vector<storage::claimed_message> got;
    storage::claim_batch_early(c, area.statements(), queue, n, 100, 0, 0,
                               [&](std::vector<storage::claimed_message> m) {
                                 for (auto& x : m)
                                   got.push_back(std::move(x));
                               });
    return got;
  }
  // Fails message `id` as a node would: claim it and write a failure.
  void fail(const std::string& queue, std::int32_t n) {
    for (auto& m : claim_all(area.sql(), n, queue)) {
      storage::outcome o;
      o.id = m.id;
      o.attempt = m.attempt;
      o.state = storage::outcome_state::failed;
      o.error_json = R"({"type":"boom","text":"it broke","attempt":1})";
      o.ran_ms = 5;
      storage::complete_batch(area.sql(), area.statements(), n, {o});
    }
  }
};

} // namespace

CAF_TEST_FIXTURE_SCOPE(operations_tests, fixture)

CAF_TEST(a pause is persistent and idempotent and holds only its own queue) {
  auto first = ops.pause("default");
  CAF_CHECK(first.paused);
  CAF_REQUIRE(first.changed_at_ms.has_value());
  auto again = ops.pause("default");
  CAF_CHECK(again.paused);
  CAF_CHECK_EQUAL(*again.changed_at_ms, *first.changed_at_ms); // nothing changed
  producer.enqueue(job(1));
  producer.enqueue(job(2).on_queue("other"));
  CAF_CHECK_EQUAL(count("state = 'queued'"), 2); // publishing goes on
  auto n = node();
  CAF_CHECK_EQUAL(claim(area.sql(), n), 0u);
  CAF_CHECK_EQUAL(claim(area.sql(), n, "other"), 1u);
  // A new admin (a new session, as after a restart) sees the same state.
  admin later{admin_options{area.dsn(), area.where()}};
  auto status = later.queue_status();
  CAF_REQUIRE_EQUAL(status.size(), 2u); // paused once, or consumed by the registered node
  CAF_CHECK_EQUAL(status[0].queue, "default");
  CAF_CHECK(status[0].paused);
  CAF_CHECK_EQUAL(status[1].queue, "other");
  CAF_CHECK(!status[1].paused);
  CAF_CHECK(!status[1].changed_at_ms);
  // Another area in the same database is not paused.
  testkit::scratch_area elsewhere;
  client p2{client_options{elsewhere.dsn(), elsewhere.where()}};
  p2.enqueue(job(3));
  auto n2 = storage::register_node(elsewhere.sql(), elsewhere.statements(), who);
  CAF_CHECK_EQUAL(storage::claim_batch(elsewhere.sql(), elsewhere.statements(), "default", n2, 10)
                    .messages.size(),
                  1u);
  CAF_CHECK(!later.resume("default").paused);
  CAF_CHECK(!later.resume("default").paused);
  CAF_CHECK_EQUAL(claim(area.sql(), n), 1u);
}

CAF_TEST(a pause committed during a claim is never overtaken) {
  for (int i = 0; i < 4; ++i)
    producer.enqueue(job(i));
  auto n = node();
  // A claim in flight: its transaction holds the pause gate and two locked rows.
  auto claimer = storage::connection::open(area.dsn(), "claimer");
  claimer.exec("BEGIN");
  claimer.exec(storage::claim_pause_gate_sql(area.where(), "default"));
  auto locked = claimer.exec_params(area.statements().get(storage::sql::claim_lock).text,
                                    {"default", "2"}, "claim_lock");
  CAF_REQUIRE_EQUAL(locked.rows(), 2);
  auto pausing = std::async(std::launch::async, [&] { return ops.pause("default"); });
  // The pause waits for the claim: its session waits on the gate's lock.
  CAF_CHECK(testkit::wait_until(
    [&] {
      return area.scalar("SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                         "AND application_name = 'troupe-admin'") == 1;
    },
    10s));
  CAF_CHECK(pausing.wait_for(0ms) == std::future_status::timeout);
  // A claim that begins now waits for the pause, then finds the queue paused.
  auto late = std::async(std::launch::async, [&] {
    auto c = storage::connection::open(area.dsn(), "late-claimer");
    return claim(c, n);
  });
  CAF_CHECK(testkit::wait_until(
    [&] {
      return area.scalar("SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                         "AND application_name = 'late-claimer'") == 1;
    },
    10s));
  claimer.exec("COMMIT"); // the first claim ends (its rows stay queued: it marked none)
  CAF_CHECK(pausing.get().paused);
  CAF_CHECK_EQUAL(late.get(), 0u);
  CAF_CHECK_EQUAL(claim(area.sql(), n), 0u);
  ops.resume("default");
  CAF_CHECK_EQUAL(claim(area.sql(), n), 4u);
}

CAF_TEST(a cancel of a queued or delayed message cancels it and nothing revives it) {
  auto ready = producer.enqueue(job(1));
  auto delayed = producer.enqueue(job(2).with_delay(60s));
  auto r = ops.cancel(ready.id);
  CAF_CHECK(r.outcome == cancel_outcome::cancelled);
  CAF_CHECK_EQUAL(r.state, "cancelled");
  CAF_CHECK(ops.cancel(delayed.id).outcome == cancel_outcome::cancelled);
  CAF_CHECK(ops.cancel(delayed.id).outcome == cancel_outcome::cancelled); // idempotent
  CAF_CHECK_EQUAL(count("state = 'cancelled' AND finished_at IS NOT NULL"), 2);
  auto n = node();
  CAF_CHECK_EQUAL(claim(area.sql(), n), 0u);
  // Publishing the same id again, a retry or a reap never revive it.
  auto again = job(3);
  again.id = ready.id;
  producer.enqueue(again);
  CAF_CHECK(ops.retry(ready.id).outcome == retry_outcome::not_failed);
  storage::reap_dead_nodes(area.sql(), area.statements(), 0ms);
  CAF_CHECK_EQUAL(count("state = 'cancelled'"), 2);
  CAF_CHECK_EQUAL(claim(area.sql(), n), 0u);
  // A result reader is told.
  try {
    producer.get_result_json(ready.id);
    CAF_FAIL("a cancelled message had a result");
  } catch (const result_error& e) {
    CAF_CHECK(e.code() == errc::task_cancelled);
  }
  auto missing = ops.cancel("00000000-0000-4000-8000-00000000abcd");
  CAF_CHECK(missing.outcome == cancel_outcome::missing);
  CAF_CHECK(ops.cancel_status("00000000-0000-4000-8000-00000000abcd").state.empty());
}

CAF_TEST(a cancel of a running message is a request and a finished one is terminal) {
  auto m = producer.enqueue(job(1));
  auto done = producer.enqueue(job(2));
  auto n = node();
  auto claimed = claim_all(area.sql(), n);
  CAF_REQUIRE_EQUAL(claimed.size(), 2u);
  auto& other = claimed[0].id == done.id ? claimed[0] : claimed[1];
  storage::outcome o;
  o.id = other.id;
  o.attempt = other.attempt;
  o.state = storage::outcome_state::done;
  storage::complete_batch(area.sql(), area.statements(), n, {o});
  auto r = ops.cancel(m.id);
  CAF_CHECK(r.outcome == cancel_outcome::requested);
  CAF_CHECK_EQUAL(r.state, "running");
  CAF_CHECK(ops.cancel(m.id).outcome == cancel_outcome::requested);
  auto st = ops.cancel_status(m.id);
  CAF_CHECK_EQUAL(st.state, "running");
  CAF_CHECK(st.requested);
  auto t = ops.cancel(done.id);
  CAF_CHECK(t.outcome == cancel_outcome::terminal);
  CAF_CHECK_EQUAL(t.state, "done");
  CAF_CHECK_EQUAL(count(fmt::format("message_id = '{}' AND state = 'done'", done.id)), 1);
  // The node sees it in its control poll.
  auto control = storage::control_poll(area.sql(), area.statements(), n, who.queues);
  CAF_REQUIRE_EQUAL(control.cancels.size(), 1u);
  CAF_CHECK_EQUAL(control.cancels[0].second, m.id);
  // The attempt fails: the message is cancelled, not retried.
  auto& mine = claimed[0].id == m.id ? claimed[0] : claimed[1];
  storage::outcome f;
  f.id = mine.id;
  f.attempt = mine.attempt;
  f.state = storage::outcome_state::retry;
  f.error_json = R"({"type":"troupe::cancellation_requested","text":"stopped","attempt":1})";
  f.ran_ms = 10;
  CAF_CHECK_EQUAL(storage::complete_batch(area.sql(), area.statements(), n, {f}), 1);
  CAF_CHECK_EQUAL(count(fmt::format("message_id = '{}' AND state = 'cancelled'", m.id)), 1);
}

CAF_TEST(a prefetched message handed back or reaped with its cancel requested is cancelled) {
  auto a = producer.enqueue(job(1));
  auto b = producer.enqueue(job(2));
  std::int32_t n = 0;
  std::vector<storage::claimed_message> claimed;
  {
    auto doomed = storage::connection::open(area.dsn(), "doomed");
    n = storage::register_node(doomed, area.statements(), who);
    claimed = claim_all(doomed, n);
    CAF_REQUIRE_EQUAL(claimed.size(), 2u);
    CAF_CHECK(ops.cancel(a.id).outcome == cancel_outcome::requested);
    CAF_CHECK(ops.cancel(b.id).outcome == cancel_outcome::requested);
    auto& first = claimed[0].id == a.id ? claimed[0] : claimed[1];
    CAF_CHECK_EQUAL(storage::release_claimed(doomed, area.statements(), n, {first}), 0);
    CAF_CHECK_EQUAL(count(fmt::format("message_id = '{}' AND state = 'cancelled'", a.id)), 1);
  } // b's node dies
  CAF_CHECK(testkit::wait_until(
    [&] {
      storage::reap_dead_nodes(area.sql(), area.statements(), 0ms);
      return count("state = 'cancelled'") == 2;
    },
    10s));
  CAF_CHECK_EQUAL(count("state = 'cancelled' AND attempts = 0 AND owner_node IS NULL"), 2);
}

CAF_TEST(a cancel by filter takes the queued and running messages it matches) {
  for (int i = 0; i < 5; ++i)
    producer.enqueue(job(i));
  for (int i = 0; i < 3; ++i)
    producer.enqueue(job(i).on_queue("other"));
  auto n = node();
  auto running = claim_all(area.sql(), n, "other");
  CAF_REQUIRE_EQUAL(running.size(), 3u);
  auto none = ops.cancel_matching(message_filter{std::string("default"), std::string("nope"), {}});
  CAF_CHECK_EQUAL(none.cancelled + none.requested, 0);
  auto only_queued =
    ops.cancel_matching(message_filter{std::nullopt, std::string("job"), {"queued"}});
  CAF_CHECK_EQUAL(only_queued.cancelled, 5);
  CAF_CHECK_EQUAL(only_queued.requested, 0);
  auto rest = ops.cancel_matching(message_filter{std::string("other"), std::nullopt, {}});
  CAF_CHECK_EQUAL(rest.cancelled, 0);
  CAF_CHECK_EQUAL(rest.requested, 3);
  CAF_CHECK_EQUAL(count("state = 'running' AND cancel_requested"), 3);
  auto again = ops.cancel_matching(message_filter{std::string("other"), std::nullopt, {}});
  CAF_CHECK_EQUAL(again.cancelled + again.requested, 0);
  try {
    ops.cancel_matching(message_filter{std::nullopt, std::nullopt, {"done"}});
    CAF_FAIL("cancelling done messages was accepted");
  } catch (const error& e) {
    CAF_CHECK(e.code() == errc::invalid_argument);
  }
}

CAF_TEST(failed messages are listed in id order with filters and a cursor) {
  // Failed messages in two queues and two tasks, and others that did not fail.
  task_ref<void(int)> other_task{"other_task"};
  std::vector<message> batch;
  for (int i = 0; i < 7; ++i)
    batch.push_back(i % 2 ? job(i) : other_task(i));
  for (int i = 0; i < 4; ++i)
    batch.push_back(job(i).on_queue("other"));
  producer.enqueue_many(batch);
  auto n = node();
  fail("default", n);
  fail("other", n);
  producer.enqueue(job(99)); // queued, not failed
  // The reference: every failed id, in uuid order, by filter.
  auto reference = [&](const std::string& where) {
    std::vector<std::string> ids;
    auto r = area.sql().exec(fmt::format("SELECT message_id::text FROM {} WHERE state = 'failed' "
                                         "AND {} ORDER BY message_id",
                                         area.queue_table(), where));
    for (int i = 0; i < r.rows(); ++i)
      ids.emplace_back(r.text(i, 0));
    return ids;
  };
  auto pages = [&](failed_query q) {
    std::vector<std::string> ids;
    for (int guard = 0; guard < 100; ++guard) {
      auto page = ops.failed(q);
      CAF_CHECK(page.items.size() <= static_cast<std::size_t>(q.limit));
      for (const auto& m : page.items) {
        ids.push_back(m.message_id);
        CAF_CHECK(!m.args_json && !m.options_json); // never in a list
        CAF_CHECK(m.error_json.find("it broke") != std::string::npos);
      }
      if (!page.next_after)
        break;
      q.after = page.next_after;
    }
    return ids;
  };
  failed_query all;
  all.limit = 3;
  CAF_CHECK_EQUAL(pages(all), reference("true"));
  CAF_CHECK_EQUAL(reference("true").size(), 11u);
  failed_query by_queue = all;
  by_queue.queue = "other";
  CAF_CHECK_EQUAL(pages(by_queue), reference("queue_name = 'other'"));
  failed_query by_task = all;
  by_task.task = "job";
  by_task.limit = 1000;
  CAF_CHECK_EQUAL(pages(by_task), reference("task_name = 'job'"));
  auto first = reference("true").front();
  auto shown = ops.show_failed(first);
  CAF_CHECK(shown.args_json.has_value());
  CAF_CHECK_EQUAL(shown.attempts, 1);
  try {
    ops.show_failed(producer.enqueue(job(5)).id);
    CAF_FAIL("a queued message was shown as failed");
  } catch (const error& e) {
    CAF_CHECK(e.code() == errc::not_found);
    CAF_CHECK(std::string(e.what()).find("queued, not failed") != std::string::npos);
  }
  failed_query bad;
  bad.limit = 1001;
  try {
    ops.failed(bad);
    CAF_FAIL("limit 1001 was accepted");
  } catch (const error& e) {
    CAF_CHECK(e.code() == errc::invalid_argument);
  }
}

CAF_TEST(a retry runs a failed message again with a fresh start and races make one transition) {
  auto m = producer.enqueue(job(7));
  auto n = node();
  fail("default", n);
  CAF_REQUIRE_EQUAL(count("state = 'failed' AND attempts = 1 AND error IS NOT NULL"), 1);
  // Two operators retry at once: one transition.
  admin second{admin_options{area.dsn(), area.where()}};
  area.sql().exec("BEGIN");
  area.sql().exec(
    fmt::format("SELECT 1 FROM {} WHERE message_id = '{}' FOR UPDATE", area.queue_table(), m.id));
  auto one = std::async(std::launch::async, [&] { return ops.retry(m.id); });
  auto two = std::async(std::launch::async, [&] { return second.retry(m.id); });
  CAF_CHECK(testkit::wait_until(
    [&] {
      auto c = storage::connection::open(area.dsn(), "watch");
      return c.exec("SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND "
                    "application_name = 'troupe-admin'")
               .int64(0, 0) == 2;
    },
    10s));
  area.sql().exec("COMMIT");
  auto r1 = one.get();
  auto r2 = two.get();
  CAF_CHECK_EQUAL((r1.outcome == retry_outcome::retried) + (r2.outcome == retry_outcome::retried),
                  1);
  CAF_CHECK((r1.outcome == retry_outcome::not_failed) != (r2.outcome == retry_outcome::not_failed));
  CAF_CHECK_EQUAL(count(fmt::format("message_id = '{}' AND state = 'queued' AND attempts = 0 AND "
                                    "error IS NULL AND result IS NULL AND eta <= now() AND "
                                    "task_name = 'job' AND args = '[7]'",
                                    m.id)),
                  1);
  auto again = claim_all(area.sql(), n);
  CAF_REQUIRE_EQUAL(again.size(), 1u);
  CAF_CHECK_EQUAL(again[0].attempt, 1);
  CAF_CHECK(ops.retry("00000000-0000-4000-8000-00000000abcd").outcome == retry_outcome::missing);
  // By filter.
  for (int i = 0; i < 3; ++i)
    producer.enqueue(job(i).on_queue("other"));
  fail("other", n);
  CAF_CHECK_EQUAL(ops.retry_matching(message_filter{std::string("other"), std::nullopt, {}}), 3);
  CAF_CHECK_EQUAL(count("queue_name = 'other' AND state = 'queued' AND attempts = 0"), 3);
}

CAF_TEST(an area without migration 5 refuses the operations and names the upgrade) {
  auto old = area.older_area("v4_", 4);
  admin a{admin_options{area.dsn(), old}};
  try {
    a.pause("default");
    CAF_FAIL("pausing on a version 4 area was accepted");
  } catch (const error& e) {
    CAF_CHECK(e.code() == errc::invalid_argument);
    CAF_CHECK(std::string(e.what()).find("needs version 5: run troupe upgrade") !=
              std::string::npos);
  }
}

CAF_TEST(
  purge deletes finished rows older than its age and flush deletes the queued messages of a queue) {
  for (int i = 0; i < 6; ++i)
    producer.enqueue(job(i));
  for (int i = 0; i < 3; ++i)
    producer.enqueue(job(i).on_queue("other"));
  auto n = node();
  auto claimed = claim_all(area.sql(), n);
  CAF_REQUIRE_EQUAL(claimed.size(), 6u);
  std::vector<storage::outcome> outs;
  for (std::size_t i = 0; i < claimed.size(); ++i) {
    storage::outcome o;
    o.id = claimed[i].id;
    o.attempt = claimed[i].attempt;
    o.state = i < 4 ? storage::outcome_state::done : storage::outcome_state::failed;
    if (i >= 4)
      o.error_json = R"({"type":"x","text":"y","attempt":1})";
    outs.push_back(o);
  }
  storage::complete_batch(area.sql(), area.statements(), n, outs);
  // Two done and one failed row finished two days ago; the others now.
  area.sql().exec(fmt::format("UPDATE {} SET finished_at = now() - interval '2 days' WHERE "
                              "message_id IN ('{}', '{}', '{}')",
                              area.queue_table(), claimed[0].id, claimed[1].id, claimed[4].id));
  std::vector<std::int64_t> progress;
  CAF_CHECK_EQUAL(ops.purge("1 day", {"done"}, [&](std::int64_t t) { progress.push_back(t); }), 2);
  CAF_CHECK_EQUAL(progress, std::vector<std::int64_t>{2});
  CAF_CHECK_EQUAL(ops.purge("1 day"), 1); // the failed one
  CAF_CHECK_EQUAL(ops.purge("1 day"), 0);
  CAF_CHECK_EQUAL(count("state IN ('done', 'failed')"), 3);
  for (const char* bad : {"-1 day", "0", "soon"}) {
    try {
      ops.purge(bad);
      CAF_FAIL("purge accepted the age " << bad);
    } catch (const error& e) {
      CAF_CHECK(e.code() == errc::invalid_argument);
    }
  }
  // Flush: the queued messages of one queue, not its running ones, nor other queues'.
  auto running = claim_all(area.sql(), n, "other");
  CAF_REQUIRE_EQUAL(running.size(), 3u);
  for (int i = 0; i < 4; ++i)
    producer.enqueue(job(i).on_queue("other"));
  producer.enqueue(job(9).with_delay(60s).on_queue("other"));
  producer.enqueue(job(10));
  CAF_CHECK_EQUAL(ops.flush("other"), 5);
  CAF_CHECK_EQUAL(count("queue_name = 'other' AND state = 'running'"), 3);
  CAF_CHECK_EQUAL(count("queue_name = 'default' AND state = 'queued'"), 1);
}

CAF_TEST(recover puts back the messages of a dead node at once) {
  for (int i = 0; i < 3; ++i)
    producer.enqueue(job(i));
  {
    auto doomed = storage::connection::open(area.dsn(), "doomed");
    auto id = storage::register_node(doomed, area.statements(), who);
    CAF_REQUIRE_EQUAL(claim_all(doomed, id).size(), 3u);
  }
  recover_report r;
  CAF_CHECK(testkit::wait_until(
    [&] {
      r = ops.recover();
      return r.dead_nodes == 1;
    },
    10s));
  CAF_CHECK_EQUAL(r.recovered, 3);
  CAF_CHECK_EQUAL(count("state = 'queued' AND attempts = 0"), 3);
}

CAF_TEST_FIXTURE_SCOPE_END()
