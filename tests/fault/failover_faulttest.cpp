// PostgreSQL failover under real worker processes: a primary and a synchronous streaming standby
// (two private clusters of this test's own), nodes and a producer on a multi-host DSN
// (target_session_attrs=read-write). Mid-run the primary is stopped hard and the standby
// promoted: nodes and the producer reconnect to the new primary by themselves, and every message
// whose publish was acknowledged is done; none is lost.
#define CAF_SUITE failover_faults
#include <caf/test/unit_test.hpp>

#include "cli_runner.hpp"
#include "local_postgres.hpp"
#include "scratch_area.hpp"
#include "storage/connection.hpp"
#include "storage/migrations.hpp"
#include "troupe/client.hpp"
#include "troupe/task.hpp"

#include <fmt/format.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <mutex>
#include <optional>
#include <set>
#include <thread>

using namespace troupe;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

namespace {

task_ref<void(int)> sleep_ms{"sleep_ms"};

const area where{"failover", ""};

struct replicated_pair {
  fs::path primary_dir;
  fs::path standby_dir;
  std::optional<testkit::local_postgres> primary;
  std::optional<testkit::local_postgres> standby;
  /// Both servers, the writable one chosen at each connection.
  std::string dsn;
  std::string setup_error;

  replicated_pair() {
    testkit::local_postgres::stop_leftovers("troupe-failover-");
    auto base = fs::temp_directory_path() / fmt::format("troupe-failover-{}", ::getpid());
    fs::remove_all(base);
    fs::create_directories(base);
    primary_dir = base / "primary";
    standby_dir = base / "standby";
    try {
      set_up();
    } catch (const std::exception& e) {
      setup_error = e.what();
    }
  }

  void set_up() {
    // A commit returns once the standby has it: an acknowledged publish survives the failover.
    primary = testkit::local_postgres::start(
      {primary_dir.string(), 5432,
       "-c fsync=off -c wal_level=replica -c max_wal_senders=4 -c synchronous_commit=on "
       "-c synchronous_standby_names='*'"});
    fs::create_directories(standby_dir);
    if (::geteuid() == 0)
      std::system(
        fmt::format("chown postgres: {}", testkit::shell_quote(standby_dir.string())).c_str());
    auto backup =
      fmt::format("{}/pg_basebackup -h {} -p 5432 -U postgres -D {} -X stream -R -c fast >{} 2>&1",
                  testkit::postgres_bin_dir(), testkit::shell_quote(primary_dir.string()),
                  testkit::shell_quote((standby_dir / "data").string()),
                  testkit::shell_quote((standby_dir / "basebackup.log").string()));
    if (testkit::local_postgres::run_as_server_user(backup) != 0)
      throw std::runtime_error("pg_basebackup failed; see " +
                               (standby_dir / "basebackup.log").string());
    standby = testkit::local_postgres::start({standby_dir.string(), 5433, "-c fsync=off"});
    if (!testkit::wait_until(
          [&] {
            return testkit::scalar_at(primary->dsn(),
                                      "SELECT count(*) FROM pg_stat_replication WHERE state = "
                                      "'streaming' AND sync_state = 'sync'") == 1;
          },
          30s))
      throw std::runtime_error("the standby did not stream synchronously within 30 s");
    dsn = fmt::format("host={},{} port=5432,5433 user=postgres dbname=postgres "
                      "target_session_attrs=read-write connect_timeout=2",
                      primary_dir.string(), standby_dir.string());
    auto conn = storage::connection::open(dsn, "troupe-test");
    storage::migrate(conn, *storage::make_statement_set(where));
    conn.exec("CREATE TABLE failover.runs (message_id uuid, node text, attempt int, "
              "at timestamptz DEFAULT clock_timestamp())");
  }

  ~replicated_pair() {
    if (standby)
      standby->stop();
    if (primary)
      primary->stop();
    std::error_code ec;
    fs::remove_all(primary_dir.parent_path(), ec);
  }

  std::int64_t scalar(const std::string& query) { return testkit::scalar_at(dsn, query); }

  std::unique_ptr<testkit::child_process> worker(const std::string& name) {
    return std::make_unique<testkit::child_process>(
      testkit::sibling_binary("troupe-test-worker"),
      std::vector<std::string>{dsn, where.schema, "default", "2", "4", "10000", name});
  }
};

} // namespace

CAF_TEST_FIXTURE_SCOPE(failover_fault_tests, replicated_pair)

CAF_TEST(nodes and producers follow a promoted standby and every acknowledged message is done) {
  if (!setup_error.empty()) {
    CAF_CHECK_EQUAL(setup_error, "");
    return;
  }
  // Tasks note their runs through the same multi-host DSN.
  ::setenv("TROUPE_TEST_NOTE_DSN", dsn.c_str(), 1);
  auto a = worker("node-f1");
  auto b = worker("node-f2");
  ::unsetenv("TROUPE_TEST_NOTE_DSN");
  CAF_CHECK(
    testkit::wait_until([&] { return scalar("SELECT count(*) FROM failover.nodes") == 2; }, 30s));
  // A producer publishes batches of 20 all along; a batch counts once its publish returned.
  std::mutex m;
  std::set<std::string> acknowledged;
  std::atomic<bool> stop{false};
  std::atomic<int> refused{0};
  std::thread producer([&] {
    client c{client_options{dsn, where}};
    while (!stop) {
      std::vector<message> batch;
      for (int i = 0; i < 20; ++i)
        batch.push_back(sleep_ms(10));
      try {
        c.enqueue_many(batch);
        std::lock_guard guard{m};
        for (const auto& msg : batch)
          acknowledged.insert(msg.id);
      } catch (const std::exception&) {
        ++refused; // not acknowledged: the producer would publish again
      }
      std::this_thread::sleep_for(50ms);
    }
  });
  auto acknowledged_count = [&] {
    std::lock_guard guard{m};
    return acknowledged.size();
  };
  CAF_CHECK(testkit::wait_until(
    [&] { return scalar("SELECT count(*) FROM failover.queue WHERE state = 'done'") >= 300; },
    60s));
  // The primary dies; the standby is promoted.
  primary->stop_immediately();
  auto promote =
    fmt::format("{}/pg_ctl -D {} -w promote >/dev/null 2>&1", testkit::postgres_bin_dir(),
                testkit::shell_quote((standby_dir / "data").string()));
  CAF_REQUIRE_EQUAL(testkit::local_postgres::run_as_server_user(promote), 0);
  auto before = acknowledged_count();
  // Publishing goes on against the new primary.
  CAF_CHECK(testkit::wait_until([&] { return acknowledged_count() >= before + 200; }, 60s));
  stop = true;
  producer.join();
  std::vector<std::string> ids;
  {
    std::lock_guard guard{m};
    ids.assign(acknowledged.begin(), acknowledged.end());
  }
  CAF_MESSAGE(ids.size() << " messages acknowledged, " << refused.load()
                         << " batches refused around the failover");
  // Every acknowledged message is done on the new primary.
  std::string list;
  for (const auto& id : ids)
    list += (list.empty() ? "'" : ",'") + id + "'";
  auto done_of_acknowledged = [&] {
    return scalar(fmt::format("SELECT count(*) FROM failover.queue WHERE state = 'done' AND "
                              "message_id IN ({})",
                              list));
  };
  CAF_CHECK(testkit::wait_until(
    [&] { return done_of_acknowledged() == static_cast<std::int64_t>(ids.size()); }, 90s));
  CAF_CHECK_EQUAL(done_of_acknowledged(), static_cast<std::int64_t>(ids.size()));
  CAF_CHECK_EQUAL(scalar("SELECT count(*) FROM failover.queue WHERE state NOT IN ('done')"), 0);
  // Each ran; the one server left is the promoted standby.
  CAF_CHECK_EQUAL(scalar(fmt::format("SELECT count(DISTINCT message_id) FROM failover.runs WHERE "
                                     "message_id IN ({})",
                                     list)),
                  static_cast<std::int64_t>(ids.size()));
  CAF_MESSAGE(scalar("SELECT count(*) - count(DISTINCT message_id) FROM failover.runs")
              << " duplicate runs across the failover");
  CAF_CHECK_EQUAL(testkit::scalar_at(standby->dsn(), "SELECT pg_is_in_recovery()::int"), 0);
  for (auto* n : {a.get(), b.get()}) {
    n->signal(SIGTERM);
    CAF_CHECK_EQUAL(n->wait(30s), 0);
  }
}

CAF_TEST_FIXTURE_SCOPE_END()
