#define CAF_SUITE node_faults
#include <caf/test/unit_test.hpp>

#include "local_postgres.hpp"
#include "scratch_area.hpp"
#include "socket_proxy.hpp"
#include "storage/migrations.hpp"
#include "storage/naming.hpp"
#include "troupe/admin.hpp"
#include "troupe/client.hpp"
#include "troupe/dsn.hpp"
#include "troupe/task.hpp"

#include <fmt/format.h>
#include <signal.h>

#include <filesystem>

using namespace troupe;
using namespace std::chrono_literals;

namespace {

task_ref<void()> record{"record"};
task_ref<void(int)> sleep_ms{"sleep_ms"};

std::string test_dsn_option(const std::string& key) {
  return dsn_option(testkit::test_dsn(), key).value_or("");
}

std::string worker_binary() {
  return testkit::sibling_binary("troupe-test-worker");
}

struct fixture {
  testkit::scratch_area area;
  client producer{client_options{area.dsn(), area.where()}};

  fixture() {
    area.sql().exec(fmt::format("CREATE TABLE {}.runs (message_id uuid, node text, attempt int, "
                                "at timestamptz DEFAULT clock_timestamp())",
                                storage::quote_identifier(area.where().schema)));
  }

  std::unique_ptr<testkit::child_process> worker(const std::string& name, int concurrency = 2,
                                                 int prefetch = 4, int grace_ms = 5000) {
    return std::make_unique<testkit::child_process>(
      worker_binary(), std::vector<std::string>{
                         area.dsn(), area.where().schema, "default", std::to_string(concurrency),
                         std::to_string(prefetch), std::to_string(grace_ms), name});
  }

  std::int64_t count(const std::string& where) {
    return area.scalar(fmt::format("SELECT count(*) FROM {} WHERE {}", area.queue_table(), where));
  }

  // How many messages ran more than once.
  std::int64_t ran_more_than_once() {
    return area.scalar(fmt::format("SELECT count(*) FROM (SELECT message_id FROM {}.runs "
                                   "GROUP BY 1 HAVING count(*) > 1) d",
                                   storage::quote_identifier(area.where().schema)));
  }

  std::int64_t runs(const std::string& where) {
    return area.scalar(fmt::format("SELECT count(*) FROM {}.runs WHERE {}",
                                   storage::quote_identifier(area.where().schema), where));
  }
};

} // namespace

CAF_TEST_FIXTURE_SCOPE(node_fault_tests, fixture)

CAF_TEST(a node killed mid task loses nothing and its task finishes on another node) {
  auto long_one = producer.enqueue(sleep_ms(2000));
  std::vector<message> rest;
  for (int i = 0; i < 50; ++i)
    rest.push_back(record());
  producer.enqueue_many(rest);
  auto a = worker("node-a", 1, 0);
  CAF_REQUIRE(testkit::wait_until(
    [&] { return runs(fmt::format("message_id = '{}' AND node = 'node-a'", long_one.id)) == 1; },
    20s));
  auto b = worker("node-b");
  a->signal(SIGKILL);
  CAF_CHECK_EQUAL(a->wait(5s), 128 + SIGKILL);
  auto killed_at = std::chrono::steady_clock::now();
  CAF_CHECK(testkit::wait_until(
    [&] { return count(fmt::format("message_id = '{}' AND state = 'done'", long_one.id)) == 1; },
    10s));
  auto recovered_in = std::chrono::steady_clock::now() - killed_at;
  CAF_CHECK(recovered_in < 10s);
  CAF_CHECK(runs(fmt::format("message_id = '{}' AND node = 'node-b'", long_one.id)) == 1);
  CAF_CHECK(testkit::wait_until([&] { return count("state = 'done'") == 51; }, 20s));
  CAF_CHECK_EQUAL(count("state <> 'done'"), 0);
  // Only the message that was running when node-a died ran twice.
  CAF_CHECK_EQUAL(ran_more_than_once(), 1);
  b->signal(SIGTERM);
  CAF_CHECK_EQUAL(b->wait(20s), 0);
}

CAF_TEST(a pause under two nodes holds through the kill of one and loses nothing) {
  auto long_one = producer.enqueue(sleep_ms(3000));
  auto a = worker("node-a", 1, 0);
  CAF_REQUIRE(testkit::wait_until(
    [&] { return runs(fmt::format("message_id = '{}' AND node = 'node-a'", long_one.id)) == 1; },
    20s));
  auto b = worker("node-b", 2, 4);
  std::vector<message> rest;
  for (int i = 0; i < 30; ++i)
    rest.push_back(sleep_ms(20));
  producer.enqueue_many(rest);
  // Paused while node-a runs its long task and node-b works through the rest.
  admin ops{admin_options{area.dsn(), area.where()}};
  CAF_REQUIRE(testkit::wait_until([&] { return runs("node = 'node-b'") >= 2; }, 20s));
  ops.pause("default");
  // node-b finishes what it runs and hands back what it prefetched; node-a's task still runs.
  CAF_REQUIRE(testkit::wait_until(
    [&] {
      return count(fmt::format("state = 'running' AND message_id <> '{}'", long_one.id)) == 0;
    },
    10s));
  auto ran_before_kill = runs("true");
  a->signal(SIGKILL);
  CAF_CHECK_EQUAL(a->wait(5s), 128 + SIGKILL);
  // The dead node's message goes back to the paused queue, and nothing starts it.
  CAF_CHECK(testkit::wait_until(
    [&] { return count(fmt::format("message_id = '{}' AND state = 'queued'", long_one.id)) == 1; },
    15s));
  CAF_CHECK(!testkit::wait_until([&] { return runs("true") > ran_before_kill; }, 2s));
  CAF_CHECK_EQUAL(count("state = 'running'"), 0);
  // Resumed: everything is done, each message ran once, but the one that was running when
  // node-a died, which ran once more on node-b.
  ops.resume("default");
  CAF_CHECK(testkit::wait_until([&] { return count("state = 'done'") == 31; }, 30s));
  CAF_CHECK_EQUAL(count("state <> 'done'"), 0);
  CAF_CHECK_EQUAL(runs(fmt::format("message_id = '{}' AND node = 'node-b'", long_one.id)), 1);
  CAF_CHECK_EQUAL(ran_more_than_once(), 1);
  b->signal(SIGTERM);
  CAF_CHECK_EQUAL(b->wait(20s), 0);
}

CAF_TEST(a node told to terminate stops gracefully with nothing lost and nothing left claimed) {
  std::vector<message> batch;
  for (int i = 0; i < 40; ++i)
    batch.push_back(sleep_ms(100));
  producer.enqueue_many(batch);
  auto w = worker("node-t", 2, 10, 10000);
  CAF_REQUIRE(testkit::wait_until([&] { return runs("true") >= 4; }, 20s));
  w->signal(SIGTERM);
  CAF_CHECK_EQUAL(w->wait(30s), 0);
  CAF_CHECK_EQUAL(count("state = 'running'"), 0);
  auto done = count("state = 'done'");
  CAF_CHECK(done >= 4);
  CAF_CHECK_EQUAL(count("state = 'queued' AND attempts = 0"), 40 - done);
  CAF_CHECK_EQUAL(runs("true"), done); // nothing started that did not finish
  CAF_CHECK_EQUAL(area.scalar(fmt::format("SELECT count(*) FROM {}.nodes",
                                          storage::quote_identifier(area.where().schema))),
                  0);
  // A new node finishes the rest, each exactly once.
  auto again = worker("node-u", 4, 10);
  CAF_CHECK(testkit::wait_until([&] { return count("state = 'done'") == 40; }, 30s));
  CAF_CHECK_EQUAL(runs("true"), 40);
  again->signal(SIGTERM);
  CAF_CHECK_EQUAL(again->wait(30s), 0);
}

CAF_TEST(
  a task that brings its process down runs again on another node with the lost attempt counted) {
  auto m = producer.enqueue(task_ref<void()>{"crash_once"}());
  auto a = worker("node-crash", 1, 0);
  CAF_CHECK_EQUAL(a->wait(20s), 128 + SIGABRT);
  auto b = worker("node-after");
  CAF_CHECK(testkit::wait_until(
    [&] { return count(fmt::format("message_id = '{}' AND state = 'done'", m.id)) == 1; }, 15s));
  CAF_CHECK_EQUAL(count(fmt::format("message_id = '{}' AND attempts = 2", m.id)), 1);
  CAF_CHECK_EQUAL(
    runs(fmt::format("message_id = '{}' AND node = 'node-crash' AND attempt = 1", m.id)), 1);
  CAF_CHECK_EQUAL(
    runs(fmt::format("message_id = '{}' AND node = 'node-after' AND attempt = 2", m.id)), 1);
  b->signal(SIGTERM);
  CAF_CHECK_EQUAL(b->wait(20s), 0);
}

CAF_TEST(twenty kills of a busy node never fail a healthy message) {
  // Each message may fail twice, and a message lost while it ran comes back with that attempt
  // counted (its next start checks it against max_retries); one handed back unstarted has used
  // none.
  for (int b = 0; b < 3; ++b) {
    std::vector<message> batch;
    for (int i = 0; i < 1000; ++i)
      batch.push_back(sleep_ms(20).with_max_retries(2));
    producer.enqueue_many(batch);
  }
  auto steady = worker("node-steady", 1, 2); // its janitor recovers what each killed node held
  for (int kill = 0; kill < 20; ++kill) {
    auto name = fmt::format("node-k{}", kill);
    auto busy = worker(name, 2, 8);
    // Killed once it has run twenty messages: running and prefetched ones die with it.
    CAF_REQUIRE(
      testkit::wait_until([&] { return runs(fmt::format("node = '{}'", name)) >= 20; }, 20s));
    busy->signal(SIGKILL);
    CAF_REQUIRE_EQUAL(busy->wait(5s), 128 + SIGKILL);
  }
  auto rest = worker("node-rest", 4, 8);
  CAF_CHECK(testkit::wait_until([&] { return count("state = 'done'") == 3000; }, 90s));
  CAF_CHECK_EQUAL(count("state <> 'done'"), 0);
  // A message that had not started when its node died used no attempt: no message has used
  // more attempts than it had runs, but for one whose claim wrote its start and whose task
  // died before noting its run (at most one per kill). Charging the eight that each kill
  // handed back unstarted would make that over 150.
  auto over = area.scalar(
    fmt::format("SELECT count(*) FROM {} q WHERE q.attempts > (SELECT count(*) FROM {}.runs r "
                "WHERE r.message_id = q.message_id)",
                area.queue_table(), storage::quote_identifier(area.where().schema)));
  CAF_CHECK_LESS_OR_EQUAL(over, 20);
  // Lost attempts came back counted: at most two per kill (a killed node runs two at a time).
  CAF_CHECK_LESS_OR_EQUAL(count("attempts > 1"), 40);
  for (auto* w : {steady.get(), rest.get()}) {
    w->signal(SIGTERM);
    CAF_CHECK_EQUAL(w->wait(30s), 0);
  }
}

CAF_TEST(a message that keeps bringing its process down ends failed and the rest run) {
  auto poison = producer.enqueue(task_ref<void()>{"crash_always"}().with_max_retries(1));
  std::vector<message> healthy;
  for (int i = 0; i < 10; ++i)
    healthy.push_back(record());
  producer.enqueue_many(healthy);
  // Each node that dies is replaced; the next one's janitor recovers what the dead one held.
  auto failed = [&] {
    return count(fmt::format("message_id = '{}' AND state = 'failed'", poison.id)) == 1;
  };
  int deaths = 0;
  auto node = worker("node-p0", 1, 0);
  auto deadline = std::chrono::steady_clock::now() + 90s;
  while (!failed() && std::chrono::steady_clock::now() < deadline) {
    if (node->wait(200ms) == 128 + SIGABRT) {
      ++deaths;
      node = worker(fmt::format("node-p{}", deaths), 1, 0);
    }
  }
  CAF_REQUIRE(failed());
  // max_retries=1: two attempts started and were lost, the third does not run.
  CAF_CHECK_EQUAL(area.scalar(fmt::format("SELECT count(*) FROM {} WHERE message_id = '{}' "
                                          "AND error->>'type' = 'troupe::poison_message'",
                                          area.queue_table(), poison.id)),
                  1);
  CAF_CHECK_EQUAL(count(fmt::format("message_id = '{}' AND attempts = 3", poison.id)), 1);
  CAF_CHECK(deaths >= 2);
  CAF_CHECK(deaths <= 6); // one more per claim whose commit the death beat
  CAF_CHECK(testkit::wait_until([&] { return count("state = 'done'") == 10; }, 30s));
  node->signal(SIGTERM);
  CAF_CHECK_EQUAL(node->wait(30s), 0);
}

CAF_TEST(a node cut off from its liveness lock starts nothing until it has the lock back) {
  // The node reaches the database through a proxy. Its listener's session is ended and the
  // proxy refuses new connections: the node's storage connections still work, but it cannot
  // take its liveness lock again, and its own janitor declares it dead after the grace.
  auto target = test_dsn_option("host");
  testkit::socket_proxy proxy{target, std::stoi(test_dsn_option("port"))};
  ::setenv("TROUPE_TEST_NOTE_DSN", area.dsn().c_str(), 1);
  auto node = std::make_unique<testkit::child_process>(
    worker_binary(), std::vector<std::string>{proxy.dsn(area.dsn()), area.where().schema, "default",
                                              "2", "4", "5000", "node-cut"});
  ::unsetenv("TROUPE_TEST_NOTE_DSN");
  auto nodes = [&] {
    return area.scalar(
      fmt::format("SELECT count(*) FROM {}.nodes", storage::quote_identifier(area.where().schema)));
  };
  CAF_REQUIRE(testkit::wait_until([&] { return nodes() == 1; }, 20s));
  // Warm: a first message runs, so every storage connection of the node is open.
  producer.enqueue(record());
  CAF_REQUIRE(testkit::wait_until([&] { return count("state = 'done'") == 1; }, 20s));
  proxy.refuse_new(true);
  auto lock_class = storage::node_lock_class(area.where());
  CAF_REQUIRE_EQUAL(
    area.scalar(fmt::format("SELECT count(pg_terminate_backend(pid)) FROM pg_locks "
                            "WHERE locktype = 'advisory' AND objsubid = 2 AND classid = {}::oid",
                            lock_class)),
    1);
  // The node knows once its listener tries to reconnect (it reports the lock lost first): a
  // message published before that may be claimed, as by any node that has not noticed yet.
  CAF_REQUIRE(testkit::wait_until([&] { return proxy.refused() > 0; }, 20s));
  std::vector<message> cut_off;
  for (int i = 0; i < 4; ++i)
    cut_off.push_back(record());
  producer.enqueue_many(cut_off);
  // The node's janitor (or any) declares it dead once its lock stayed free past the grace.
  CAF_REQUIRE(testkit::wait_until([&] { return nodes() == 0; }, 30s));
  CAF_CHECK_EQUAL(count("attempts > 0 AND state <> 'done'"), 0); // nothing was claimed
  CAF_CHECK_EQUAL(runs("true"), 1);                              // nothing started
  // The lock is back: the node registers again and runs each message once.
  proxy.refuse_new(false);
  CAF_CHECK(testkit::wait_until([&] { return count("state = 'done'") == 5; }, 30s));
  CAF_CHECK_EQUAL(runs("true"), 5);
  CAF_CHECK_EQUAL(count("attempts = 1"), 5);
  node->signal(SIGTERM);
  CAF_CHECK_EQUAL(node->wait(30s), 0);
}

CAF_TEST_FIXTURE_SCOPE_END()

CAF_TEST(nodes reconnect after a PostgreSQL restart and finish every message) {
  namespace fs = std::filesystem;
  auto dir = fs::temp_directory_path() / fmt::format("troupe-restart-{}", ::getpid());
  fs::remove_all(dir);
  auto pg = testkit::local_postgres::start({dir.string(), 5432, "-c fsync=off"});
  {
    area where{"restart_test", ""};
    auto conn = storage::connection::open(pg.dsn(), "troupe-test");
    storage::migrate(conn, *storage::make_statement_set(where));
    conn.exec("CREATE TABLE restart_test.runs (message_id uuid, node text, attempt int, "
              "at timestamptz DEFAULT clock_timestamp())");
    client producer{client_options{pg.dsn(), where}};
    std::vector<message> batch;
    for (int i = 0; i < 400; ++i)
      batch.push_back(sleep_ms(5));
    producer.enqueue_many(batch);
    std::vector<std::unique_ptr<testkit::child_process>> nodes;
    for (const char* name : {"node-r1", "node-r2"})
      nodes.push_back(std::make_unique<testkit::child_process>(
        worker_binary(),
        std::vector<std::string>{pg.dsn(), "restart_test", "default", "2", "4", "10000", name}));
    auto done = [&] {
      try {
        auto c = storage::connection::open(pg.dsn(), "troupe-test");
        return c.exec("SELECT count(*) FROM restart_test.queue WHERE state = 'done'").int64(0, 0);
      } catch (const std::exception&) {
        return std::int64_t{-1};
      }
    };
    CAF_REQUIRE(testkit::wait_until([&] { return done() >= 50; }, 30s));
    pg.restart();
    CAF_CHECK(testkit::wait_until([&] { return done() == 400; }, 60s));
    auto c = storage::connection::open(pg.dsn(), "troupe-test");
    CAF_CHECK_EQUAL(
      c.exec("SELECT count(*) FROM restart_test.queue WHERE state <> 'done'").int64(0, 0), 0);
    // Every message ran; a rerun is only allowed for one whose completion died with the server.
    CAF_CHECK_EQUAL(c.exec("SELECT count(DISTINCT message_id) FROM restart_test.runs").int64(0, 0),
                    400);
    for (auto& n : nodes) {
      n->signal(SIGTERM);
      CAF_CHECK_EQUAL(n->wait(30s), 0);
    }
  }
  pg.stop();
  fs::remove_all(dir);
}
