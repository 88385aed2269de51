// The statistics of `troupe stats` (admin::stats): the finished states come from counts that
// every statement moving rows into or out of them keeps, and this suite checks after each of
// those paths that the counts say what the rows say.
#define CAF_SUITE stats
#include <caf/test/unit_test.hpp>

#include "scratch_area.hpp"
#include "storage/counts.hpp"
#include "storage/operations.hpp"
#include "storage/queries.hpp"
#include "troupe/admin.hpp"
#include "troupe/client.hpp"
#include "troupe/error.hpp"
#include "troupe/task.hpp"
#include "troupe/transactional.hpp"

#include <fmt/format.h>

#include <atomic>
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

  // Every queue's counts by state as the rows say them, "queue state=n ..." a queue per line.
  std::string truth() {
    auto r = area.sql().exec(fmt::format(
      "SELECT queue_name || ' ' || string_agg(state::text || '=' || n, ' ' ORDER BY state) "
      "FROM (SELECT queue_name, state, count(*) AS n FROM {} GROUP BY 1, 2) c "
      "GROUP BY queue_name ORDER BY queue_name",
      area.queue_table()));
    std::string out;
    for (int i = 0; i < r.rows(); ++i)
      out += std::string(r.text(i, 0)) + "\n";
    return out;
  }
  // The same, as admin::stats reports it.
  std::string reported() {
    std::string out;
    for (const auto& s : ops.stats()) {
      out += s.queue;
      for (auto [state, n] : {std::pair{"queued", s.queued}, std::pair{"running", s.running},
                              std::pair{"done", s.done}, std::pair{"failed", s.failed},
                              std::pair{"cancelled", s.cancelled}})
        if (n != 0)
          out += fmt::format(" {}={}", state, n);
      out += "\n";
    }
    return out;
  }
  // The counts match the rows before the janitor's fold and after it.
  bool counts_hold(const std::string& step) {
    auto before = reported();
    storage::fold_state_counts(area.sql(), area.statements());
    auto pending = area.scalar("SELECT count(*) FROM " + table("state_count_changes"));
    auto after = reported();
    auto rows = truth();
    if (before == rows && after == rows && pending == 0)
      return true;
    CAF_MESSAGE("after " << step << ": rows\n"
                         << rows << "stats before the fold\n"
                         << before << "after it\n"
                         << after << pending << " changes left");
    return false;
  }
  std::int64_t count_rows(const std::string& where) {
    return area.scalar(fmt::format("SELECT count(*) FROM {} WHERE {}", area.queue_table(), where));
  }
  std::string table(const std::string& name) {
    return storage::quote_identifier(area.where().schema) + "." +
           storage::quote_identifier(area.where().prefix + name);
  }
  std::vector<storage::claimed_message> claim(storage::connection& c, std::int32_t node,
                                              std::int32_t n, const std::string& queue) {
    return storage::claim_batch(c, area.statements(), queue, node, n).messages;
  }
  static storage::outcome outcome_of(const storage::claimed_message& m, storage::outcome_state s) {
    storage::outcome o;
    o.id = m.id;
    o.attempt = m.attempt;
    o.state = s;
    o.ran_ms = 5;
    if (s != storage::outcome_state::done)
      o.error_json = R"({"type":"boom","text":"it broke","attempt":1})";
    return o;
  }
};

} // namespace

CAF_TEST_FIXTURE_SCOPE(stats_tests, fixture)

CAF_TEST(stats count every state and their counts follow every path that changes one) {
  using storage::outcome_state;
  std::vector<message> sent;
  for (int i = 0; i < 12; ++i)
    sent.push_back(producer.enqueue(job(i)));
  for (int i = 0; i < 6; ++i)
    producer.enqueue(job(i).on_queue("other"));
  producer.enqueue(job(99).on_queue("other").with_delay(1h));
  CAF_CHECK(counts_hold("publishing"));
  auto& c = area.sql();
  const auto& st = area.statements();
  auto n = storage::register_node(c, st, who);
  // Completions: done, failed for good, a retry (queued again), in one batch.
  auto got = claim(c, n, 4, "default");
  CAF_REQUIRE_EQUAL(got.size(), 4u);
  storage::complete_batch(
    c, st, n,
    {outcome_of(got[0], outcome_state::done), outcome_of(got[1], outcome_state::done),
     outcome_of(got[2], outcome_state::failed), outcome_of(got[3], outcome_state::retry)});
  CAF_CHECK(counts_hold("complete_batch"));
  // A retry outcome of a message whose cancel was requested is cancelled instead.
  got = claim(c, n, 2, "default");
  CAF_REQUIRE_EQUAL(got.size(), 2u);
  CAF_CHECK(ops.cancel(got[0].id).outcome == cancel_outcome::requested);
  storage::complete_batch(c, st, n, {outcome_of(got[0], outcome_state::retry)});
  // A prefetched message handed back after a cancel request is cancelled too.
  CAF_CHECK(ops.cancel(got[1].id).outcome == cancel_outcome::requested);
  CAF_CHECK_EQUAL(storage::release_claimed(c, st, n, {got[1]}), 0);
  CAF_CHECK(counts_hold("cancelled completions and hand-backs"));
  // Cancels of queued messages, one and by filter.
  CAF_CHECK(ops.cancel(sent[11].id).outcome == cancel_outcome::cancelled);
  message_filter other;
  other.queue = "other";
  other.states = {"queued"};
  CAF_CHECK_EQUAL(ops.cancel_matching(other).cancelled, 7);
  CAF_CHECK(counts_hold("cancels"));
  // A hand-back after a claim of unknown outcome (recover_unheld) cancels what was requested.
  got = claim(c, n, 2, "default");
  CAF_REQUIRE_EQUAL(got.size(), 2u);
  ops.cancel(got[0].id);
  storage::recover_unheld(c, st, n, "default", {}, {});
  CAF_CHECK(counts_hold("recover_unheld"));
  // A dead node's messages: one whose cancel was requested is cancelled.
  {
    auto doomed = storage::connection::open(area.dsn(), "doomed-node");
    auto dead = storage::register_node(doomed, st, who);
    got = claim(doomed, dead, 2, "default");
    CAF_REQUIRE_EQUAL(got.size(), 2u);
    ops.cancel(got[0].id);
  }
  CAF_CHECK(testkit::wait_until([&] { return ops.recover().recovered == 2; }, 5s));
  CAF_CHECK(counts_hold("reap_dead_nodes"));
  // Operator retries: one, then by filter.
  got = claim(c, n, 3, "default");
  CAF_REQUIRE_EQUAL(got.size(), 3u);
  storage::complete_batch(c, st, n,
                          {outcome_of(got[0], outcome_state::failed),
                           outcome_of(got[1], outcome_state::failed),
                           outcome_of(got[2], outcome_state::done)});
  CAF_CHECK(counts_hold("more completions"));
  CAF_CHECK(ops.retry(got[0].id).outcome == retry_outcome::retried);
  CAF_CHECK(counts_hold("retry"));
  CAF_CHECK_EQUAL(ops.retry_matching({}), 2);
  CAF_CHECK(counts_hold("retry_matching"));
  // A re-send of a finished message puts it back in a queue (enqueue_messages, which a publish
  // falls back to when an id exists), its own or another, and of a cancelled one changes
  // nothing.
  auto done_ones = area.scalar(fmt::format("SELECT count(*) FROM {} WHERE message_id IN ('{}', "
                                           "'{}') AND state = 'done' AND queue_name = 'default'",
                                           area.queue_table(), sent[0].id, sent[1].id));
  CAF_CHECK_EQUAL(done_ones, 2);
  producer.enqueue(sent[0]);
  producer.enqueue(sent[1].on_queue("other"));
  producer.enqueue(sent[11]);
  CAF_CHECK(counts_hold("re-sends of done and cancelled messages"));
  // and of a failed one, inside a transaction of the caller's.
  got = claim(c, n, 1, "default");
  CAF_REQUIRE_EQUAL(got.size(), 1u);
  storage::complete_batch(c, st, n, {outcome_of(got[0], outcome_state::failed)});
  CAF_CHECK(counts_hold("a failure"));
  auto failed_one = job(7);
  failed_one.id = got[0].id;
  {
    auto tx = storage::connection::open(area.dsn(), "caller");
    tx.exec("BEGIN");
    enqueue_in_transaction(tx.native(), area.where(), failed_one);
    tx.exec("COMMIT");
  }
  CAF_CHECK_EQUAL(count_rows(fmt::format("message_id = '{}' AND state = 'queued'", got[0].id)), 1);
  CAF_CHECK(counts_hold("re-sends"));
  // Purges: by the janitor's retention, and `troupe purge`.
  CAF_CHECK(storage::purge_finished(c, st, storage::retention{1, 0, 0}, 1000) > 0);
  CAF_CHECK(counts_hold("purge_finished"));
  CAF_CHECK(ops.purge("1 microsecond", {}, {}) > 0);
  CAF_CHECK(counts_hold("purge"));
  CAF_CHECK_EQUAL(count_rows("state IN ('done', 'failed', 'cancelled')"), 0);
  // A queue left with no rows at all is not listed, though it has counts (all zero).
  CAF_CHECK(ops.flush("other") > 0);
  CAF_CHECK_EQUAL(count_rows("queue_name = 'other'"), 0);
  CAF_CHECK(area.scalar("SELECT count(*) FROM " + table("state_counts") +
                        " WHERE queue_name = 'other'") > 0);
  auto listed = ops.stats();
  CAF_REQUIRE_EQUAL(listed.size(), 1u);
  CAF_CHECK_EQUAL(listed[0].queue, "default");
  CAF_CHECK(counts_hold("a flush"));
}

CAF_TEST(finished counts stay exact while completions and folds run side by side) {
  std::vector<message> batch;
  for (int i = 0; i < 600; ++i)
    batch.push_back(job(i));
  producer.enqueue_many(batch);
  std::atomic<bool> finished{false};
  std::string folder_error;
  std::string worker_error;
  std::thread folder([&] {
    try {
      auto c = storage::connection::open(area.dsn(), "folder");
      auto limit = std::chrono::steady_clock::now() + 60s; // bounded, whatever the worker does
      while (!finished && std::chrono::steady_clock::now() < limit)
        storage::fold_state_counts(c, area.statements());
    } catch (const std::exception& e) {
      folder_error = e.what();
    }
  });
  std::thread worker([&] {
    try {
      auto c = storage::connection::open(area.dsn(), "worker");
      auto n = storage::register_node(c, area.statements(), who);
      for (;;) {
        auto got = claim(c, n, 25, "default");
        if (got.empty())
          break;
        std::vector<storage::outcome> out;
        for (std::size_t i = 0; i < got.size(); ++i)
          out.push_back(outcome_of(got[i], i % 5 == 0 ? storage::outcome_state::failed
                                                      : storage::outcome_state::done));
        storage::complete_batch(c, area.statements(), n, out);
      }
    } catch (const std::exception& e) {
      worker_error = e.what();
    }
    finished = true;
  });
  worker.join();
  folder.join();
  CAF_CHECK_EQUAL(worker_error, "");
  CAF_CHECK_EQUAL(folder_error, "");
  CAF_CHECK_EQUAL(truth(), "default done=480 failed=120\n");
  CAF_CHECK(counts_hold("concurrent completions and folds"));
}

CAF_TEST(a recount sets the counts right after rows changed behind them) {
  for (int i = 0; i < 5; ++i)
    producer.enqueue(job(i));
  auto n = storage::register_node(area.sql(), area.statements(), who);
  auto got = claim(area.sql(), n, 5, "default");
  std::vector<storage::outcome> out;
  for (const auto& m : got)
    out.push_back(outcome_of(m, storage::outcome_state::done));
  storage::complete_batch(area.sql(), area.statements(), n, out);
  // Rows deleted by plain SQL are not counted out.
  area.sql().exec(fmt::format("DELETE FROM {} WHERE message_id IN (SELECT message_id FROM {} "
                              "LIMIT 2)",
                              area.queue_table(), area.queue_table()));
  auto done_of = [&] { return ops.stats().at(0).done; }; // by value: a copy of the count
  CAF_CHECK_EQUAL(done_of(), 5);
  CAF_CHECK_EQUAL(ops.recount_stats(), 1);
  CAF_CHECK_EQUAL(done_of(), 3);
  CAF_CHECK(counts_hold("a recount"));
  // A transaction that changed a count and stays open holds the recount off, which gives up
  // with a timeout that says why; once it ends the recount goes through.
  auto holder = storage::connection::open(area.dsn(), "holder");
  holder.exec("BEGIN");
  holder.exec(fmt::format("INSERT INTO {} (queue_name, state, n) VALUES ('default', 'done', 0)",
                          table("state_count_changes")));
  std::string why;
  try {
    ops.recount_stats(200ms);
  } catch (const error& e) {
    CAF_CHECK(e.code() == errc::timeout);
    why = e.what();
  }
  CAF_CHECK(why.find("still open") != std::string::npos);
  holder.exec("COMMIT");
  CAF_CHECK_EQUAL(ops.recount_stats(200ms), 1);
  CAF_CHECK(counts_hold("a recount after a wait"));
}

CAF_TEST_FIXTURE_SCOPE_END()
