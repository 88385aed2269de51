// Hostile rows written into the queue table by plain SQL while a node runs: every column at its
// extremes. Each bad row is refused where it is written, with the name of the rule it breaks,
// or ends failed with a failure record that names its fault; every other message is done; and
// the node's log stays bounded.
#define CAF_SUITE bad_input
#include <caf/test/unit_test.hpp>

#include "cli_runner.hpp"
#include "node_harness.hpp"
#include "storage/connection.hpp"
#include "storage/migrations.hpp"
#include "storage/naming.hpp"
#include "storage/queries.hpp"
#include "troupe/config.hpp"
#include "troupe/dsn.hpp"
#include "troupe/error.hpp"
#include "troupe/log.hpp"
#include "troupe/task.hpp"

#include <spdlog/sinks/base_sink.h>

#include <fmt/format.h>

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <string>
#include <vector>

using namespace troupe;
using namespace std::chrono_literals;

namespace {

task_ref<int(int)> twice{"twice"};

/// Counts the lines the logger writes, and keeps the longest.
class counting_sink final : public spdlog::sinks::base_sink<std::mutex> {
public:
  std::atomic<std::size_t> lines{0};
  std::atomic<std::size_t> longest{0};

protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    ++lines;
    if (msg.payload.size() > longest)
      longest = msg.payload.size();
  }
  void flush_() override {}
};

struct fixture : testkit::node_harness {
  std::shared_ptr<counting_sink> sink = std::make_shared<counting_sink>();

  fixture() {
    task_options keep;
    keep.store_results = true;
    tasks->define(
      twice, [](int x) { return 2 * x; }, keep);
    log().sinks().push_back(sink);
  }
  ~fixture() {
    auto& sinks = log().sinks();
    sinks.erase(std::remove(sinks.begin(), sinks.end(), sink), sinks.end());
  }

  /// Inserts one row by plain SQL with these column values; returns "" when it went in, else
  /// the database's error.
  std::string insert(const std::string& columns, const std::string& values) {
    try {
      area.sql().exec(
        fmt::format("INSERT INTO {} ({}) VALUES ({})", area.queue_table(), columns, values));
      return "";
    } catch (const error& e) {
      return e.what();
    }
  }

  std::string failure_of(const std::string& id) {
    auto r = area.sql().exec(fmt::format("SELECT state::text || ' ' || coalesce(error::text, '') "
                                         "FROM {} WHERE message_id = '{}'",
                                         area.queue_table(), id));
    return r.rows() == 1 ? std::string(r.text(0, 0)) : "(no row)";
  }
};

bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

std::string id(int n) {
  return fmt::format("00000000-0000-4000-8000-{:012}", n);
}

} // namespace

CAF_TEST_FIXTURE_SCOPE(bad_input_tests, fixture)

CAF_TEST(hostile rows are refused or fail with their fault named and the rest is done) {
  queue_options q;
  q.concurrency = 4;
  q.poll_interval = 200ms;
  start_node(options(q));
  std::vector<message> good;
  for (int i = 0; i < 50; ++i)
    good.push_back(twice(i));
  producer.enqueue_many(good);

  // Refused where they are written, naming the rule.
  const std::string cols = "message_id, queue_name, task_name, args, eta, enqueued_at, attempts";
  struct refusal {
    std::string values;
    std::string rule;
  };
  std::vector<refusal> refused = {
    {"gen_random_uuid(), 'default', 'twice', '[1]', 'infinity', now(), 0", "queue_eta_finite"},
    {"gen_random_uuid(), 'default', 'twice', '[1]', '-infinity', now(), 0", "queue_eta_finite"},
    {"gen_random_uuid(), 'default', 'twice', '[1]', now(), 'infinity', 0",
     "queue_enqueued_at_finite"},
    {"gen_random_uuid(), 'default', 'twice', '[1]', now(), '-infinity', 0",
     "queue_enqueued_at_finite"},
    {"gen_random_uuid(), 'default', 'twice', '[1]', now(), now(), 2147483647",
     "queue_attempts_range"},
    {"gen_random_uuid(), 'default', 'twice', '[1]', now(), now(), -1", "queue_attempts_range"},
    {"gen_random_uuid(), '', 'twice', '[1]', now(), now(), 0", "queue_queue_name_length"},
    {"gen_random_uuid(), repeat('q', 48), 'twice', '[1]', now(), now(), 0",
     "queue_queue_name_length"},
    {"gen_random_uuid(), 'default', '', '[1]', now(), now(), 0", "queue_task_name_length"},
    {"gen_random_uuid(), 'default', repeat('t', 100000), '[1]', now(), now(), 0",
     "queue_task_name_length"},
    {"gen_random_uuid(), 'default', 'twice', NULL, now(), now(), 0", "null value in column"},
    {"gen_random_uuid(), 'default', 'twice', '[1', now(), now(), 0", "invalid input syntax"},
    // Bytes that are not UTF-8, and a NUL, cannot even be JSON in the database.
    {"gen_random_uuid(), 'default', 'twice', ('[\"' || convert_from('\\xff'::bytea, 'UTF8') "
     "|| '\"]')::jsonb, now(), now(), 0",
     "invalid byte sequence for encoding"},
    {"gen_random_uuid(), 'default', 'twice', '[\"\\u0000\"]', now(), now(), 0",
     "unsupported Unicode escape sequence"},
  };
  for (const auto& r : refused) {
    auto err = insert(cols, r.values);
    if (!has(err, r.rule))
      CAF_MESSAGE("values " << r.values.substr(0, 80) << ": " << err);
    CAF_CHECK(has(err, r.rule));
  }

  // Taken, and failed with a failure record that names the fault.
  struct faulty {
    std::string columns;
    std::string values;
    std::string fault;
  };
  std::vector<faulty> failing = {
    {"task_name, args", "'twice', 'null'", "troupe::decode_failed"},
    {"task_name, args", "'twice', '{\"x\": 1}'", "troupe::decode_failed"},
    {"task_name, args", "'twice', '[\"not a number\"]'", "troupe::decode_failed"},
    {"task_name, args", "'twice', '[1, 2, 3]'", "expected 1 values, got 3"},
    {"task_name, args", "'twice', (SELECT jsonb_agg(g) FROM generate_series(1, 200000) g)",
     "expected 1 values"},
    {"task_name, args", "'twice', (repeat('[', 2000) || '1' || repeat(']', 2000))::jsonb",
     "troupe::decode_failed"},
    {"task_name, args", "'no_such_task', '[1]'", "troupe::unknown_task"},
    {"task_name, args", "'twice', '[9223372036854775807]'", "troupe::decode_failed"},
    {"task_name, args, options", "'twice', '[1]', '[]'",
     "invalid message options: they are not a JSON object"},
    {"task_name, args, options", "'twice', '[1]', '{\"time_limit\": 10000000000000}'",
     "time_limit: 10000000000000 is out of range"},
    {"task_name, args, options", "'twice', '[1]', '{\"max_retries\": \"x\"}'",
     "max_retries: expected an integer"},
    {"task_name, args, options", "'twice', '[1]', '{\"max_age\": -5}'",
     "max_age: -5 is out of range"},
    // Wrong types and arity.
    {"task_name, args", "'twice', '[true]'", "troupe::decode_failed"},
    {"task_name, args", "'twice', '[1.5]'", "troupe::decode_failed"},
    {"task_name, args", "'twice', '[]'", "expected 1 values, got 0"},
    {"task_name, args", "'twice', '\"[1]\"'", "troupe::decode_failed"},
    // SQL in a task name is a name like any other: no task has it.
    {"task_name, args", "'twice''; DROP TABLE x; --', '[1]'", "troupe::unknown_task"},
    {"task_name, args, options", "'twice', '[1]', '{\"store_results\": \"yes\"}'",
     "store_results: expected true or false"},
    {"task_name, args, options", "'twice', '[1]', '{\"on_success\": 5}'",
     "on_success: expected a task name"},
    {"task_name, args, options", "'twice', '[1]', '{\"min_backoff\": -1}'",
     "min_backoff: -1 is out of range"},
  };
  for (std::size_t i = 0; i < failing.size(); ++i) {
    auto err =
      insert("message_id, queue_name, " + failing[i].columns,
             fmt::format("'{}', 'default', {}", id(static_cast<int>(i)), failing[i].values));
    CAF_REQUIRE_EQUAL(err, "");
  }

  // Extreme values that are sound: they run.
  const std::string run_cols = "message_id, queue_name, task_name, args, priority, eta";
  CAF_REQUIRE_EQUAL(insert(run_cols, fmt::format("'{}', 'default', 'twice', '[1]', 2147483647, "
                                                 "'1970-01-01'",
                                                 id(100))),
                    "");
  CAF_REQUIRE_EQUAL(insert(run_cols, fmt::format("'{}', 'default', 'twice', '[2]', -2147483648, "
                                                 "now()",
                                                 id(101))),
                    "");
  // A running row owned by no node: the janitor puts it back, and it runs.
  CAF_REQUIRE_EQUAL(insert("message_id, queue_name, task_name, args, state, owner_node, attempts",
                           fmt::format("'{}', 'default', 'twice', '[3]', 'running', 2147483647, "
                                       "1",
                                       id(102))),
                    "");

  CAF_CHECK(testkit::wait_until(
    [&] {
      return count("state = 'done'") == 53 &&
             count("state = 'failed'") == static_cast<std::int64_t>(failing.size());
    },
    30s));
  for (std::size_t i = 0; i < failing.size(); ++i) {
    auto f = failure_of(id(static_cast<int>(i)));
    if (!has(f, "failed") || !has(f, failing[i].fault))
      CAF_MESSAGE("row " << i << " (" << failing[i].values.substr(0, 60) << "): " << f);
    CAF_CHECK(has(f, "failed"));
    CAF_CHECK(has(f, failing[i].fault));
  }
  CAF_CHECK_EQUAL(count("state = 'done' AND result = to_jsonb(2 * (args->>0)::int)"), 53);
  CAF_CHECK_EQUAL(count("state IN ('queued', 'running')"), 0);
  stop();
  // The log stayed bounded: a few lines per bad row at most, none past the logger's limit.
  CAF_MESSAGE("log lines: " << sink->lines << ", longest: " << sink->longest);
  CAF_CHECK(sink->lines < 200u);
  CAF_CHECK(sink->longest <= max_log_message + 64);
}

CAF_TEST(failure texts keep the arguments out unless the task opts in) {
  task_ref<int(int)> quoted{"quoted"};
  task_options some;
  some.quote_args_in_failures = 8;
  tasks->define(
    quoted, [](int x) { return x; }, some);
  // Both rows are written before the node starts: a node already running could run the first
  // with its published arguments before the update below.
  auto secret = producer.enqueue(twice(1));
  area.sql().exec(fmt::format("UPDATE {} SET args = '[\"s3cr3t-token-value\"]' WHERE message_id "
                              "= '{}'",
                              area.queue_table(), secret.id));
  CAF_REQUIRE_EQUAL(
    insert("message_id, queue_name, task_name, args",
           fmt::format("'{}', 'default', 'quoted', '[\"s3cr3t-token-value\"]'", id(200))),
    "");
  start_node();
  CAF_CHECK(testkit::wait_until([&] { return count("state = 'failed'") == 2; }, 20s));
  auto plain = failure_of(secret.id);
  CAF_CHECK(has(plain, "troupe::decode_failed"));
  CAF_CHECK(has(plain, "(22 bytes of JSON)"));
  CAF_CHECK(!has(plain, "s3cr3t"));
  auto opted = failure_of(id(200));
  CAF_CHECK(has(opted, "the arguments begin [\\\"s3cr3"));
  CAF_CHECK(!has(opted, "s3cr3t-token"));
}

CAF_TEST(garbage notifications on the area channels are only hints and the node works on) {
  start_node();
  auto wake = storage::wake_channel(area.where());
  auto results = storage::results_channel(area.where());
  // Payloads no Troupe process sends: nonsense, a queue that does not exist, nothing, the
  // largest payload PostgreSQL takes, control characters and quotes.
  for (const auto& channel : {wake, results})
    for (const std::string payload :
         {"garbage", "no_such_queue", "", "x' || pg_sleep(10) || '", "\x01\x02\x7f"})
      area.sql().exec_params("SELECT pg_notify($1, $2)", {channel, payload}, "notify");
  area.sql().exec_params("SELECT pg_notify($1, repeat('x', 7999))", {wake}, "notify_big");
  std::vector<message> after;
  for (int i = 0; i < 20; ++i)
    after.push_back(twice(i));
  producer.enqueue_many(after);
  CAF_CHECK(testkit::wait_until([&] { return count("state = 'done'") == 20; }, 30s));
  CAF_CHECK_EQUAL(count("state <> 'done'"), 0);
  stop();
}

CAF_TEST_FIXTURE_SCOPE_END()

CAF_TEST(names with SQL in them are refused before anything is written) {
  testkit::scratch_area area;
  auto refusal = [](auto&& f) -> std::string {
    try {
      f();
    } catch (const error& e) {
      CAF_CHECK(e.code() == errc::invalid_argument);
      return e.what();
    }
    return "accepted";
  };
  client producer{client_options{area.dsn(), area.where()}};
  auto queue = refusal([&] { producer.enqueue(twice(1).on_queue("default'; DROP TABLE x; --")); });
  CAF_CHECK(has(queue, "invalid queue name"));
  auto schema = refusal([&] {
    client c{client_options{area.dsn(), troupe::area{"troupe; DROP SCHEMA public", ""}}};
    c.enqueue(twice(1));
  });
  CAF_CHECK(has(schema, "schema"));
  auto prefix = refusal([&] {
    client c{client_options{area.dsn(), troupe::area{"troupe", "x\"; --"}}};
    c.enqueue(twice(1));
  });
  CAF_CHECK(has(prefix, "prefix"));
  auto task = refusal([&] { producer.enqueue(task_ref<void()>{""}()); });
  CAF_CHECK(has(task, "task"));
  CAF_CHECK_EQUAL(area.scalar("SELECT count(*) FROM " + area.queue_table()), 0);
}

CAF_TEST(bad config values are refused naming the key) {
  struct bad_config {
    std::string ini;
    std::string named;
  };
  std::vector<bad_config> cases = {
    {"[queues]\ndefault={concurrency=0}\n",
     "queues.default.concurrency must be between 1 and 1024"},
    {"[node]\nshutdown-grace=25h\n", "node.shutdown-grace must be between"},
    {"[node]\nconcurency=3\n", "unknown key \"node.concurency\""},
    {"[metrics]\nport=70000\n", "metrics.port must be from 0 to 65535"},
    {"[queues]\nEmails={}\n", "invalid queue name"},
    {"[area]\nschema=\"a; DROP\"\n", "schema"},
    {"[limits]\npay={kind=\"conc\", limit=1}\n", "unknown kind \"conc\""},
    {"[database]\ndsn=\"host=db password='s3cret port=\"\n", "database.dsn"},
  };
  for (const auto& c : cases) {
    std::string what = "accepted";
    try {
      config::load_from_string(c.ini);
    } catch (const error& e) {
      what = e.what();
    }
    if (!has(what, c.named))
      CAF_MESSAGE(c.ini << " -> " << what);
    CAF_CHECK(has(what, c.named));
    CAF_CHECK(!has(what, "s3cret"));
  }
}

CAF_TEST(bad command line arguments are refused naming the argument) {
  testkit::scratch_area area;
  auto global = "--dsn " + testkit::shell_quote(area.dsn()) + " --schema " + area.where().schema;
  struct bad_command {
    std::string args;
    int status;
    std::string named;
  };
  std::vector<bad_command> cases = {
    {global + " frobnicate", 2, "frobnicate"},
    {global + " pause " + testkit::shell_quote("q'); DROP TABLE x; --"), 2, "invalid queue name"},
    {global + " states --sort args", 2, "option --sort is \"args\""},
    {global + " states --limit 0", 2, "--limit"},
    {global + " retry not-a-uuid", 2, "is not a message id"},
    {"--schema " + testkit::shell_quote("a; DROP") + " --dsn " + testkit::shell_quote(area.dsn()) +
       " stats",
     2, "schema"},
  };
  for (const auto& c : cases) {
    auto r = testkit::troupe_cli(c.args, "timeout 20 ");
    if (r.status != c.status || !has(r.out, c.named))
      CAF_MESSAGE(c.args << " -> " << r.status << ": " << r.out);
    CAF_CHECK_EQUAL(r.status, c.status);
    CAF_CHECK(has(r.out, c.named));
  }
  CAF_CHECK_EQUAL(area.scalar("SELECT count(*) FROM " + area.queue_table()), 0);
}

CAF_TEST(a failure record is stored in a SQL_ASCII database whatever bytes it holds) {
  auto admin = storage::connection::open(testkit::test_dsn(), "troupe-test");
  auto db = fmt::format("troupe_ascii_{}", ::getpid());
  admin.exec("DROP DATABASE IF EXISTS " + db);
  admin.exec("CREATE DATABASE " + db +
             " ENCODING 'SQL_ASCII' TEMPLATE template0 LC_COLLATE 'C' LC_CTYPE 'C'");
  {
    auto dsn = fmt::format("host={} port={} user={} dbname={}",
                           dsn_option(testkit::test_dsn(), "host").value_or(""),
                           dsn_option(testkit::test_dsn(), "port").value_or("5432"),
                           dsn_option(testkit::test_dsn(), "user").value_or("postgres"), db);
    area where{"troupe", ""};
    auto conn = storage::connection::open(dsn, "troupe-test");
    storage::migrate(conn, *storage::make_statement_set(where));
    // A task name that is not UTF-8: its unknown_task failure text holds U+FFFD.
    client producer{client_options{dsn, where}};
    auto m = producer.enqueue(task_ref<void()>{"caf\xe9"}());
    caf::actor_system_config cfg;
    caf::actor_system sys{cfg};
    node_options o;
    o.dsn = dsn;
    o.area = where;
    o.queues.push_back(queue_options{});
    // A node of one other task: it has none of that name.
    auto tasks = std::make_shared<task_registry>();
    tasks->define(task_ref<void()>{"ascii.other"}, [] {});
    auto node = spawn_worker_node(sys, o, tasks);
    auto failed = [&] {
      return conn
               .exec(fmt::format("SELECT count(*) FROM troupe.queue WHERE message_id = '{}' AND "
                                 "state = 'failed' AND error->>'type' = 'troupe::unknown_task'",
                                 m.id))
               .int64(0, 0) == 1;
    };
    CAF_CHECK(testkit::wait_until(failed, 20s));
    caf::scoped_actor self{sys};
    self->request(node, 30s, stop_atom_v).receive([](const node_report&) {}, [](caf::error&) {});
  }
  admin.exec("DROP DATABASE " + db + " WITH (FORCE)");
}

CAF_TEST(a node connection runs with its statement timeout and keeps it across a vacuum) {
  testkit::scratch_area area;
  auto conn = storage::connection::open(area.dsn(), "troupe-test", 1500ms);
  CAF_CHECK_EQUAL(std::string(conn.exec("SHOW statement_timeout").text(0, 0)), "1500ms");
  // The janitor's vacuum runs under 30 s of its own, then the session's setting is back.
  CAF_CHECK(storage::vacuum_queue(conn, area.statements(), 0) >= 0);
  CAF_CHECK_EQUAL(std::string(conn.exec("SHOW statement_timeout").text(0, 0)), "1500ms");
  // A statement past it is cancelled.
  try {
    conn.exec("SELECT pg_sleep(3)");
    CAF_FAIL("pg_sleep(3) was not cancelled");
  } catch (const error& e) {
    CAF_CHECK(has(e.what(), "statement timeout"));
  }
}
