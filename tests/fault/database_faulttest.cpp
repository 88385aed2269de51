// PostgreSQL faults under real worker processes, each case on a private cluster of its own (so
// that it can restart the server and end sessions by kind without touching other suites): the
// server restarted three times and then down for 20 s mid-run, and every kind of Troupe
// connection ended by pg_terminate_backend mid-run. Nodes, producers and result waiters recover
// by themselves; every acknowledged message is done; counts are checked in SQL.
#define CAF_SUITE database_faults
#include <caf/test/unit_test.hpp>

#include "local_postgres.hpp"
#include "scratch_area.hpp"
#include "storage/connection.hpp"
#include "storage/migrations.hpp"
#include "troupe/caf.hpp"
#include "troupe/client.hpp"
#include "troupe/task.hpp"

#include <caf/all.hpp>

#include <fmt/format.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <future>
#include <optional>
#include <thread>

using namespace troupe;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

namespace {

task_ref<void(int)> sleep_ms{"sleep_ms"};
task_ref<int(int, int)> slow_inc{"slow_inc"};

const area where{"dbfault", ""};

struct private_cluster {
  fs::path dir;
  testkit::local_postgres pg;

  static fs::path folder() {
    testkit::local_postgres::stop_leftovers("troupe-dbfault-");
    static std::atomic<int> next{0};
    return fs::temp_directory_path() / fmt::format("troupe-dbfault-{}-{}", ::getpid(), next++);
  }

  private_cluster()
      : dir(folder()), pg((fs::remove_all(dir),
                           testkit::local_postgres::start({dir.string(), 5432, "-c fsync=off"}))) {
    auto conn = storage::connection::open(pg.dsn(), "troupe-test");
    storage::migrate(conn, *storage::make_statement_set(where));
    conn.exec("CREATE TABLE dbfault.runs (message_id uuid, node text, attempt int, "
              "at timestamptz DEFAULT clock_timestamp())");
  }

  ~private_cluster() {
    pg.stop();
    fs::remove_all(dir);
  }

  /// The first column of the first row of `query`, on a fresh connection (the server may have
  /// restarted since the last one); -1 while it cannot be read.
  std::int64_t scalar(const std::string& query) { return testkit::scalar_at(pg.dsn(), query); }
  std::int64_t count(const std::string& where_clause) {
    return scalar("SELECT count(*) FROM dbfault.queue WHERE " + where_clause);
  }
  std::int64_t runs(const std::string& where_clause) {
    return scalar("SELECT count(*) FROM dbfault.runs WHERE " + where_clause);
  }
  std::int64_t ran_more_than_once() {
    return scalar("SELECT count(*) FROM (SELECT message_id FROM dbfault.runs GROUP BY 1 "
                  "HAVING count(*) > 1) d");
  }
  /// Ends the sessions whose application_name is `kind`; how many it ended.
  std::int64_t terminate(const std::string& kind) {
    return scalar(fmt::format("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                              "WHERE application_name = '{}'",
                              kind));
  }
  /// Each node's row as it is: a node declared dead gets its row back under its id when its
  /// listener returns, with a new started_at.
  std::string registrations() {
    try {
      auto c = storage::connection::open(pg.dsn(), "troupe-test");
      return std::string(c.exec("SELECT coalesce(string_agg(node_id || '@' || started_at, ',' "
                                "ORDER BY node_id), '') FROM dbfault.nodes")
                           .text(0, 0));
    } catch (const std::exception& e) {
      return std::string("unreadable: ") + e.what();
    }
  }
  /// Messages a janitor recovered from a node it declared dead.
  std::int64_t recovered() { return count("error->>'type' = 'troupe::attempt_lost'"); }
  std::int64_t sessions(const std::string& kind) {
    return scalar(
      fmt::format("SELECT count(*) FROM pg_stat_activity WHERE application_name = '{}'", kind));
  }

  std::unique_ptr<testkit::child_process> worker(const std::string& name, int concurrency,
                                                 int prefetch) {
    return std::make_unique<testkit::child_process>(
      testkit::sibling_binary("troupe-test-worker"),
      std::vector<std::string>{pg.dsn(), where.schema, "default", std::to_string(concurrency),
                               std::to_string(prefetch), "10000", name});
  }
};

} // namespace

CAF_TEST_FIXTURE_SCOPE(database_fault_tests, private_cluster)

CAF_TEST(nodes ride through three restarts and a 20 s outage of PostgreSQL and lose nothing) {
  constexpr int total = 3000;
  {
    client producer{client_options{pg.dsn(), where}};
    for (int b = 0; b < total / 1000; ++b) {
      std::vector<message> batch;
      for (int i = 0; i < 1000; ++i)
        batch.push_back(sleep_ms(20));
      producer.enqueue_many(batch);
    }
  }
  auto a = worker("node-r1", 2, 4);
  auto b = worker("node-r2", 2, 4);
  CAF_REQUIRE(
    testkit::wait_until([&] { return scalar("SELECT count(*) FROM dbfault.nodes") == 2; }, 30s));
  auto registered = registrations();
  // Three crashes of the server, each once the nodes have made progress since the last.
  for (int restart = 1; restart <= 3; ++restart) {
    CAF_REQUIRE(testkit::wait_until([&] { return count("state = 'done'") >= 300 * restart; }, 60s));
    pg.restart();
  }
  // Then down for 20 s: far longer than the nodes' reconnect backoff and the dead-node grace.
  CAF_REQUIRE(testkit::wait_until([&] { return count("state = 'done'") >= 1200; }, 60s));
  pg.stop_immediately();
  std::this_thread::sleep_for(20s); // the outage itself, not a wait for a condition
  pg.start_again();
  CAF_CHECK(testkit::wait_until([&] { return count("state = 'done'") == total; }, 90s));
  CAF_CHECK_EQUAL(count("state <> 'done'"), 0);
  CAF_CHECK_EQUAL(scalar("SELECT count(DISTINCT message_id) FROM dbfault.runs"), total);
  // A rerun only for a message whose completion died with the server: at most the four running
  // at each of the four crashes.
  CAF_MESSAGE(ran_more_than_once() << " of " << total << " messages ran twice");
  CAF_CHECK_LESS_OR_EQUAL(ran_more_than_once(), 16);
  // Neither node was declared dead: both kept their rows as they were (their listeners took their
  // locks back within the grace each time), and no message was recovered from either.
  CAF_CHECK_EQUAL(registrations(), registered);
  CAF_CHECK_EQUAL(recovered(), 0);
  for (auto* n : {a.get(), b.get()}) {
    n->signal(SIGTERM);
    CAF_CHECK_EQUAL(n->wait(30s), 0);
  }
}

CAF_TEST(each kind of connection ended by the server reconnects and nothing is lost) {
  auto node = worker("node-t", 2, 4);
  CAF_REQUIRE(
    testkit::wait_until([&] { return scalar("SELECT count(*) FROM dbfault.nodes") == 1; }, 30s));
  auto registered = registrations();
  // A CAF application's producer (a storage pool) and result waiter, and a plain client.
  caf::actor_system_config cfg;
  caf::actor_system sys{cfg};
  caf::scoped_actor self{sys};
  auto pool = spawn_storage_pool(sys, pg.dsn(), where, 1);
  auto waiter = spawn_result_waiter(sys, pg.dsn(), where);
  client plain{client_options{pg.dsn(), where}};
  std::int64_t published = 0;
  int next_value = 0;
  // Publishes a batch through the pool, retrying as a producer does when its connection was
  // ended under it (a refused publish wrote nothing: it is sent again with the same ids).
  auto publish_through_pool = [&](int n, int ms = 5) {
    std::vector<message> batch;
    for (int i = 0; i < n; ++i)
      batch.push_back(slow_inc(ms, next_value++));
    for (int attempt = 0;; ++attempt) {
      bool ok = false;
      self->request(pool, 10s, enqueue_atom_v, batch, std::vector<enqueue_options>{})
        .receive([&](const std::vector<message>&) { ok = true; },
                 [&](caf::error& err) { CAF_MESSAGE("pool publish refused: " << describe(err)); });
      if (ok)
        break;
      CAF_REQUIRE(attempt < 20);
      std::this_thread::sleep_for(100ms);
    }
    published += n;
    return batch.back();
  };
  auto publish_through_client = [&](int n) {
    std::vector<message> batch;
    for (int i = 0; i < n; ++i)
      batch.push_back(slow_inc(5, next_value++));
    for (int attempt = 0;; ++attempt) {
      try {
        plain.enqueue_many(batch);
        break;
      } catch (const error& e) {
        CAF_MESSAGE("client publish refused: " << e.what());
        CAF_REQUIRE(e.code() == errc::connection_lost && attempt < 20);
        std::this_thread::sleep_for(100ms);
      }
    }
    published += n;
    return batch.back();
  };
  publish_through_pool(20);
  publish_through_client(20);
  for (const std::string kind : {"troupe-listener", "troupe-node", "troupe-producer",
                                 "troupe-client", "troupe-result-waiter"}) {
    CAF_MESSAGE("ending the sessions of " << kind);
    // A result that is waited for across the cut (its task takes 1.5 s), by a requester of its
    // own.
    auto awaited = publish_through_pool(1, 1500);
    auto expected = std::to_string(next_value); // the value published, plus one
    auto wait_for_result = [&sys, waiter, id = awaited.id] {
      caf::scoped_actor requester{sys};
      std::string out = "no answer";
      requester->request(waiter, 90s, caf::get_atom_v, id, std::int64_t{60'000})
        .receive([&](const std::string& json) { out = json; },
                 [&](caf::error& err) { out = "error: " + describe(err); });
      return out;
    };
    auto result = std::async(std::launch::async, wait_for_result);
    CAF_REQUIRE(testkit::wait_until([&] { return sessions(kind) >= 1; }, 15s));
    CAF_CHECK_GREATER_OR_EQUAL(terminate(kind), 1);
    // Work goes on through every path, and the ended kind is back.
    publish_through_pool(10);
    publish_through_client(10);
    CAF_CHECK_EQUAL(result.get(), expected);
    // Asked again, the waiter answers at once (a waiter, a client or a pool whose session was
    // ended while it was idle reconnects when it is next used).
    CAF_CHECK_EQUAL(wait_for_result(), expected);
    CAF_CHECK(testkit::wait_until([&] { return sessions(kind) >= 1; }, 20s));
  }
  CAF_CHECK(testkit::wait_until([&] { return count("state = 'done'") == published; }, 60s));
  CAF_CHECK_EQUAL(count("state <> 'done'"), 0);
  CAF_CHECK_EQUAL(scalar("SELECT count(DISTINCT message_id) FROM dbfault.runs"), published);
  // A rerun only where a storage session was ended while a claim committed (its few running).
  CAF_MESSAGE(ran_more_than_once() << " of " << published << " messages ran twice");
  CAF_CHECK_LESS_OR_EQUAL(ran_more_than_once(), 6);
  // The node kept its registration as it was: its listener took its lock back within the grace,
  // and nothing was recovered from it.
  CAF_CHECK_EQUAL(registrations(), registered);
  CAF_CHECK_EQUAL(recovered(), 0);
  self->send_exit(pool, caf::exit_reason::user_shutdown);
  self->send_exit(waiter, caf::exit_reason::user_shutdown);
  node->signal(SIGTERM);
  CAF_CHECK_EQUAL(node->wait(30s), 0);
}

CAF_TEST_FIXTURE_SCOPE_END()
