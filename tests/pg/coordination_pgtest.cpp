// Coordination across nodes: limits enforced when a node claims (concurrent, bucket, window,
// per-key concurrency), guards inside tasks and through a client, the limiter actor, barriers,
// and the errors that name their key. Limits are checked from what the tasks recorded: each
// execution writes its start and end (the database's clock) into a table, and SQL computes the
// most executions that overlapped.
#define CAF_SUITE coordination
#include <caf/test/unit_test.hpp>

#include "node_harness.hpp"
#include "storage/connection.hpp"
#include "storage/naming.hpp"
#include "troupe/coordination.hpp"

#include <fmt/format.h>

#include <atomic>
#include <thread>

using namespace troupe;
using namespace std::chrono_literals;

namespace {

// Records one execution of `key` (start, a short wait, end) on the executor thread's own
// connection: the database's clock orders executions of every node alike.
struct recorder {
  std::string dsn;
  std::string table;
  std::chrono::milliseconds hold{60};

  void run(const std::string& key, const std::string& message_id) const {
    thread_local std::optional<storage::connection> conn;
    thread_local std::string opened_for;
    if (!conn || !conn->ok() || opened_for != dsn) {
      conn.reset();
      conn.emplace(storage::connection::open(dsn, "coordination-test-task"));
      opened_for = dsn;
    }
    std::string id{
      conn
        ->exec(fmt::format("INSERT INTO {} (key, message_id) VALUES ({}, {}) RETURNING id", table,
                           conn->literal(key), conn->literal(message_id)))
        .text(0, 0)};
    std::this_thread::sleep_for(hold);
    conn->exec(fmt::format("UPDATE {} SET ended = clock_timestamp() WHERE id = {}", table, id));
  }
};

task_ref<void(std::string)> gated{"gated", "default", {concurrency("gate", 2)}};
task_ref<void(std::string)> free_run{"free_run"};
task_ref<void(std::string)> per_customer{"per_customer"};
task_ref<void(std::string)> bucketed{
  "bucketed", "default", {bucket("mail", 3, std::chrono::milliseconds(1000))}};
task_ref<void(std::string)> windowed{
  "windowed", "default", {window("sms", 2, std::chrono::milliseconds(1000))}};
task_ref<void()> held{"held", "default", {concurrency("one", 1)}};
task_ref<void()> guarded{"guarded"};
task_ref<void(std::string)> by_key{"by_key"};

struct fixture : testkit::node_harness {
  std::string runs;
  recorder rec;
  std::shared_ptr<std::atomic<bool>> hold_open = std::make_shared<std::atomic<bool>>(true);
  std::optional<node_actor> second;

  fixture() {
    runs = fmt::format("{}.{}", storage::quote_identifier(area.where().schema),
                       storage::quote_identifier(area.where().prefix + "runs"));
    area.sql().exec(fmt::format("CREATE TABLE {} (id bigserial PRIMARY KEY, key text, "
                                "message_id text, started timestamptz DEFAULT clock_timestamp(), "
                                "ended timestamptz)",
                                runs));
    rec = recorder{area.dsn(), runs};
    auto record = [r = rec](task_context& ctx, const std::string& key) {
      r.run(key, ctx.message_id);
    };
    tasks->define(gated, record);
    tasks->define(free_run, record);
    tasks->define(per_customer, record);
    tasks->define(bucketed, record);
    tasks->define(windowed, record);
    tasks->define(held, [h = hold_open] {
      while (h->load())
        std::this_thread::sleep_for(5ms);
    });
    task_options retry_soon;
    retry_soon.max_retries = 5;
    retry_soon.min_backoff = 50ms;
    retry_soon.max_backoff = 100ms;
    tasks->define(
      guarded, [](task_context& ctx) { limit_guard slot(ctx, concurrency("guarded", 1), 1h); },
      retry_soon);
    // A refusal is retried soon and often: 16 messages contend for 2 slots.
    task_options retry_often = retry_soon;
    retry_often.max_retries = 100;
    // Takes the limiter its node declares under `key` (node_options::limits, [limits]).
    tasks->define(
      by_key,
      [r = rec](task_context& ctx, const std::string& key) {
        limit_guard slot(ctx, key);
        r.run(key, ctx.message_id);
      },
      retry_often);
  }

  ~fixture() {
    hold_open->store(false);
    if (second) {
      caf::scoped_actor self{sys};
      self->request(*second, 30s, stop_atom_v)
        .receive([](const node_report&) {}, [](caf::error&) {});
    }
  }

  // Two nodes on the area, four executors each: without limits, up to eight run at once.
  void start_two_nodes() {
    queue_options q;
    q.concurrency = 4;
    start_node(options(q));
    second = spawn_worker_node(sys, options(q), tasks);
  }

  // The most executions of `key` that overlapped (each start, counted against every execution
  // running at that instant).
  std::int64_t max_overlap(const std::string& key) {
    return area.scalar(
      fmt::format("SELECT coalesce(max((SELECT count(*) FROM {0} b WHERE b.key = a.key "
                  "AND b.started <= a.started AND (b.ended IS NULL OR b.ended > a.started))), 0) "
                  "FROM {0} a WHERE a.key = {1}",
                  runs, area.sql().literal(key)));
  }

  std::int64_t recorded(const std::string& where) {
    return area.scalar(fmt::format("SELECT count(*) FROM {} WHERE {}", runs, where));
  }

  bool all_done(std::int64_t n) {
    return testkit::wait_until([&] { return count("state = 'done'") == n; }, 60s);
  }
};

} // namespace

CAF_TEST_FIXTURE_SCOPE(coordination_tests, fixture)

CAF_TEST(a concurrency limit declared on a task holds across two nodes) {
  std::vector<message> batch;
  for (int i = 0; i < 24; ++i) {
    batch.push_back(gated("gate"));
    batch.push_back(free_run("free"));
  }
  producer.enqueue_many(std::move(batch));
  start_two_nodes();
  CAF_REQUIRE(all_done(48));
  CAF_CHECK_EQUAL(recorded("key = 'gate'"), 24);
  CAF_CHECK_EQUAL(recorded("ended IS NULL"), 0);
  // The measurement sees overlaps: the unlimited task ran more than two at once.
  CAF_CHECK_GREATER(max_overlap("free"), 2);
  CAF_CHECK_LESS_OR_EQUAL(max_overlap("gate"), 2);
  CAF_CHECK_EQUAL(max_overlap("gate"), 2);
  // Every slot was given back with its message.
  CAF_CHECK_EQUAL(limit_in_use(producer, concurrency("gate", 2)), 0);
}

CAF_TEST(per key concurrency runs a key one at a time in claim order across two nodes) {
  std::vector<message> batch;
  for (int i = 0; i < 8; ++i)
    for (auto key : {"cus_a", "cus_b", "cus_c"})
      batch.push_back(per_customer(key).with_concurrency_key(key));
  // A lower priority number runs first: the last message of cus_a goes before the others.
  batch.push_back(per_customer("cus_a").with_concurrency_key("cus_a").with_priority(-1));
  auto published = producer.enqueue_many(std::move(batch));
  start_two_nodes();
  CAF_REQUIRE(all_done(25));
  for (auto key : {"cus_a", "cus_b", "cus_c"})
    CAF_CHECK_EQUAL(max_overlap(key), 1);
  // Different keys ran side by side.
  CAF_CHECK_GREATER(
    area.scalar(fmt::format("SELECT max((SELECT count(*) FROM {0} b WHERE b.started <= a.started "
                            "AND b.ended > a.started)) FROM {0} a",
                            runs)),
    1);
  // Each key's messages started in the order the queue would run them: priority, then eta,
  // then id (the ids are time-ordered, so publish order within a priority).
  auto first_a = area.scalar(
    fmt::format("SELECT count(*) FROM {} WHERE message_id = '{}' AND id = (SELECT min(id) FROM {} "
                "WHERE key = 'cus_a')",
                runs, published.back().id, runs));
  CAF_CHECK_EQUAL(first_a, 1);
  auto out_of_order = area.scalar(
    fmt::format("SELECT count(*) FROM (SELECT r.key, r.message_id, "
                "lag(r.message_id) OVER (PARTITION BY r.key ORDER BY r.started) AS before "
                "FROM {} r) x JOIN {} q ON q.message_id::text = x.message_id "
                "JOIN {} p ON p.message_id::text = x.before "
                "WHERE (p.priority, p.message_id) > (q.priority, q.message_id)",
                runs, area.queue_table(), area.queue_table()));
  CAF_CHECK_EQUAL(out_of_order, 0);
}

CAF_TEST(a message its limit holds back stays queued instead of taking an executor) {
  producer.enqueue_many({held(), held(), held()});
  queue_options q;
  q.concurrency = 4;
  q.prefetch = 4;
  start_node(options(q));
  CAF_REQUIRE(testkit::wait_until([&] { return count("state = 'running'") == 1; }, 20s));
  // Claims keep coming (the node polls while a limit holds messages back): none takes them.
  std::this_thread::sleep_for(1500ms);
  CAF_CHECK_EQUAL(count("state = 'running'"), 1);
  CAF_CHECK_EQUAL(count("state = 'queued'"), 2);
  CAF_CHECK_EQUAL(limit_in_use(producer, concurrency("one", 1)), 1);
  hold_open->store(false);
  CAF_CHECK(all_done(3));
}

CAF_TEST(a bucket limit gives at most its limit per window and a window limit per sliding window) {
  std::vector<message> batch;
  for (int i = 0; i < 9; ++i)
    batch.push_back(bucketed("mail"));
  for (int i = 0; i < 6; ++i)
    batch.push_back(windowed("sms"));
  producer.enqueue_many(std::move(batch));
  start_two_nodes();
  CAF_REQUIRE(all_done(15));
  // A rate limiter counts acquisitions, which happen when a node claims: a message under a
  // limit is claimed only for an idle executor, and its row's start is the instant its limits
  // counted it (migration 8). Each message started once.
  auto starts = fmt::format("(SELECT r.key, q.started_at AS at FROM {} r JOIN {} q "
                            "ON q.message_id::text = r.message_id)",
                            runs, area.queue_table());
  CAF_CHECK_EQUAL(recorded("key = 'mail'"), 9);
  // Buckets are aligned on the epoch: at most 3 acquisitions per whole second.
  CAF_CHECK_LESS_OR_EQUAL(
    area.scalar(fmt::format("SELECT max(n) FROM (SELECT count(*) AS n FROM {} s WHERE key = 'mail' "
                            "GROUP BY floor(extract(epoch FROM at))) x",
                            starts)),
    3);
  // 9 messages at 3 per window need three windows at least.
  CAF_CHECK_GREATER_OR_EQUAL(
    area.scalar(fmt::format("SELECT count(DISTINCT floor(extract(epoch FROM at))) FROM {} s "
                            "WHERE key = 'mail'",
                            starts)),
    3);
  // Any second from an acquisition holds at most 2 acquisitions of the window limiter.
  CAF_CHECK_LESS_OR_EQUAL(
    area.scalar(fmt::format("WITH s AS {} SELECT max((SELECT count(*) FROM s b WHERE b.key = "
                            "'sms' AND b.at >= a.at AND b.at < a.at + interval '1 second')) "
                            "FROM s a WHERE a.key = 'sms'",
                            starts)),
    2);
}

CAF_TEST(a guard that finds no room refuses and the retry policy runs the task again) {
  // The client holds the only slot: the task's guard is refused until it lets go.
  auto outside = std::make_optional<limit_guard>(producer, concurrency("guarded", 1));
  CAF_CHECK(!limit_guard::try_acquire(producer, concurrency("guarded", 1)).has_value());
  auto m = producer.enqueue(guarded());
  start_node();
  CAF_REQUIRE(testkit::wait_until(
    [&] {
      return count(fmt::format("message_id = '{}' AND error->>'type' LIKE '%limit_refused%'",
                               m.id)) == 1;
    },
    20s));
  outside.reset(); // gives the slot back
  CAF_REQUIRE(testkit::wait_until(
    [&] { return count(fmt::format("message_id = '{}' AND state = 'done'", m.id)) == 1; }, 20s));
  CAF_CHECK_GREATER_OR_EQUAL(
    area.scalar(
      fmt::format("SELECT attempts FROM {} WHERE message_id = '{}'", area.queue_table(), m.id)),
    2);
  // The task's guard gave its slot back when the task returned.
  CAF_CHECK_EQUAL(limit_in_use(producer, concurrency("guarded", 1)), 0);
}

CAF_TEST(a limiter a node declares is taken by its key and holds across two nodes) {
  queue_options q;
  q.concurrency = 4;
  auto o = options(q);
  o.limits = {concurrency("declared", 2)};
  start_node(o);
  second = spawn_worker_node(sys, o, tasks);
  std::vector<message> batch;
  for (int i = 0; i < 16; ++i)
    batch.push_back(by_key("declared"));
  auto undeclared = by_key("nowhere").with_max_retries(0);
  batch.push_back(undeclared);
  producer.enqueue_many(batch);
  CAF_REQUIRE(testkit::wait_until([&] { return count("state = 'done'") == 16; }, 60s));
  CAF_CHECK_EQUAL(recorded("key = 'declared'"), 16);
  CAF_CHECK_LESS_OR_EQUAL(max_overlap("declared"), 2);
  // A key the node does not declare fails the task, naming the key and the declared ones.
  CAF_REQUIRE(testkit::wait_until(
    [&] {
      return count(fmt::format("message_id = '{}' AND state = 'failed'", undeclared.id)) == 1;
    },
    20s));
  CAF_CHECK_EQUAL(count(fmt::format("message_id = '{}' AND error->>'text' LIKE "
                                    "'limiter \"nowhere\" is not declared on this node%declares "
                                    "declared)'",
                                    undeclared.id)),
                  1);
  CAF_CHECK_EQUAL(recorded("key = 'nowhere'"), 0);
}

CAF_TEST(slots of a node declared dead are free before their TTL) {
  // A node row whose liveness lock nobody holds, with a slot of a day's TTL: the janitor of a
  // live node declares it dead after the grace period, and its slot goes with its row.
  auto nodes = fmt::format("{}.{}", storage::quote_identifier(area.where().schema),
                           storage::quote_identifier(area.where().prefix + "nodes"));
  auto dead = area.scalar(fmt::format(
    "INSERT INTO {} (name, host, pid) VALUES ('gone', 'nowhere', 1) RETURNING node_id", nodes));
  area.sql().exec(fmt::format("INSERT INTO {}.{} (scope, name, holder, node_id, expires_at) VALUES "
                              "('', 'one', 'a-guard', {}, now() + interval '1 day')",
                              storage::quote_identifier(area.where().schema),
                              storage::quote_identifier(area.where().prefix + "coordination_holds"),
                              dead));
  CAF_CHECK_EQUAL(limit_in_use(producer, concurrency("one", 1)), 1);
  CAF_CHECK(!limit_guard::try_acquire(producer, concurrency("one", 1)).has_value());
  auto o = options();
  o.janitor_interval = 200ms;
  o.dead_node_grace = 2000ms;
  start_node(o);
  CAF_CHECK(
    testkit::wait_until([&] { return limit_in_use(producer, concurrency("one", 1)) == 0; }, 20s));
  CAF_CHECK(limit_guard::try_acquire(producer, concurrency("one", 1)).has_value());
}

CAF_TEST(a barrier releases every party once the last one arrives) {
  barrier b(producer, "import-7", 1min);
  CAF_CHECK(b.create(3));
  CAF_CHECK(!b.create(3)); // exists already, same parties
  client other{client_options{area.dsn(), area.where()}};
  std::atomic<int> released{0};
  std::thread first([&] {
    barrier mine(other, "import-7", 1min);
    if (mine.wait(20s))
      ++released;
  });
  CAF_REQUIRE(testkit::wait_until(
    [&] {
      return area.scalar(
               fmt::format("SELECT used FROM {}.{} WHERE name = 'import-7'",
                           storage::quote_identifier(area.where().schema),
                           storage::quote_identifier(area.where().prefix + "coordination"))) == 1;
    },
    20s));
  CAF_CHECK(!b.released());
  CAF_CHECK(!b.arrive()); // the second of three
  client third_client{client_options{area.dsn(), area.where()}};
  barrier third(third_client, "import-7", 1min);
  CAF_CHECK(third.wait(20s)); // the last one releases it
  first.join();
  CAF_CHECK_EQUAL(released.load(), 1);
  // The release stays visible until the barrier expires: a late party sees it at once.
  CAF_CHECK(b.released());
  CAF_CHECK(b.wait(1ms));
  // A wait that nobody completes times out.
  barrier lonely(producer, "lonely", 1min);
  lonely.create(2);
  CAF_CHECK(!lonely.wait(300ms));
}

CAF_TEST(the limiter actor answers actors without blocking them) {
  auto limiter = spawn_limiter(sys, area.dsn(), area.where());
  caf::scoped_actor self{sys};
  auto ask = [&](auto... xs) {
    bool out = false;
    std::string failure;
    self->request(limiter, 20s, xs...)
      .receive([&](bool ok) { out = ok; }, [&](caf::error& e) { failure = describe(e); });
    CAF_CHECK_EQUAL(failure, "");
    return out;
  };
  auto mutex = concurrency("actor-mutex", 1);
  CAF_CHECK(ask(acquire_atom_v, mutex, std::string("h1"), std::int64_t{60000}));
  CAF_CHECK(!ask(acquire_atom_v, mutex, std::string("h2"), std::int64_t{60000}));
  CAF_CHECK(ask(give_back_atom_v, mutex, std::string("h1")));
  CAF_CHECK(ask(acquire_atom_v, mutex, std::string("h2"), std::int64_t{60000}));
  CAF_CHECK(ask(barrier_atom_v, std::string("actors"), std::int32_t{2}, std::int64_t{60000}));
  // The first arrival waits without blocking the requester: its reply comes after the second.
  // (Spawned with an argument: CAF 0.17 spawning a function of none trips UBSan.)
  std::atomic<bool> first_done{false};
  auto waiter = sys.spawn(
    [&](caf::event_based_actor* me, limiter_actor lim) {
      me->request(lim, 20s, arrive_atom_v, std::string("actors"), std::int64_t{20000})
        .then([&](bool ok) { first_done = ok; });
    },
    limiter);
  CAF_REQUIRE(testkit::wait_until(
    [&] {
      return area.scalar(
               fmt::format("SELECT used FROM {}.{} WHERE name = 'actors'",
                           storage::quote_identifier(area.where().schema),
                           storage::quote_identifier(area.where().prefix + "coordination"))) == 1;
    },
    20s));
  CAF_CHECK(ask(arrive_atom_v, std::string("actors"), std::int64_t{0}));
  CAF_CHECK(testkit::wait_until([&] { return first_done.load(); }, 20s));
  self->send_exit(limiter, caf::exit_reason::user_shutdown);
  (void)waiter;
}

CAF_TEST(limiter and barrier errors name their key) {
  auto refused = [](auto f) -> std::string {
    try {
      f();
    } catch (const error& e) {
      return std::string(to_string(e.code())) + ": " + e.what();
    }
    return "accepted";
  };
  CAF_CHECK_EQUAL(refused([] { concurrency("payments", 0); }),
                  "invalid_argument: limiter \"payments\": limit 0 is out of range (1 to "
                  "1000000000)");
  CAF_CHECK_EQUAL(refused([] { window("sms", 5, 0ms); }),
                  "invalid_argument: limiter \"sms\": window 0 ms is out of range (1 to "
                  "31536000000 ms)");
  CAF_CHECK_EQUAL(refused([] { parse_limit_kind("sliding", "sms"); }),
                  "invalid_argument: limiter \"sms\": unknown kind \"sliding\" (concurrent, "
                  "bucket or window)");
  CAF_CHECK_EQUAL(refused([&] { barrier(producer, "b1", 0ms); }),
                  "invalid_argument: barrier \"b1\": TTL 0 ms is out of range (1 to 31536000000 "
                  "ms)");
  barrier b(producer, "b2");
  b.create(3);
  CAF_CHECK_EQUAL(refused([&] { b.create(4); }),
                  "invalid_argument: barrier \"b2\" exists with 3 parties, not 4");
  CAF_CHECK_EQUAL(refused([&] { barrier(producer, "never").arrive(); }),
                  "not_found: no barrier \"never\" (never created, or expired)");
  // A key used as one kind and then as another.
  { limit_guard g(producer, bucket("mixed", 5, 1s)); }
  CAF_CHECK_EQUAL(refused([&] { limit_guard g(producer, concurrency("mixed", 5)); }),
                  "invalid_argument: limiter \"mixed\" is a bucket limiter, not a concurrent "
                  "limiter");
  CAF_CHECK_EQUAL(refused([&] { limit_guard g(producer, concurrency("b2", 5)); }),
                  "invalid_argument: limiter \"b2\" is a barrier key, not a concurrent limiter");
  // A publish refuses malformed limits before any SQL.
  auto bad = free_run("x");
  bad.options_json = R"({"limits":[{"key":"payments","kind":"concurrent","limit":0}]})";
  auto publish_refusal = refused([&] { producer.enqueue(bad); });
  CAF_CHECK(publish_refusal.starts_with("invalid_argument: "));
  CAF_CHECK(publish_refusal.find("limiter \"payments\": limit 0 is out of range") !=
            std::string::npos);
  CAF_CHECK_EQUAL(count("true"), 0);
  // A row written by other means fails when a node claims it, its failure naming the key.
  area.sql().exec(
    fmt::format("INSERT INTO {} (message_id, queue_name, task_name, args, options) VALUES "
                "(gen_random_uuid(), 'default', 'free_run', '[\"x\"]', "
                "'{{\"limits\":[{{\"key\":\"payments\",\"kind\":\"sliding\",\"limit\":2}}]}}')",
                area.queue_table()));
  // So does one whose limiter lacks its limit, and neither stops the queue's other messages.
  area.sql().exec(
    fmt::format("INSERT INTO {} (message_id, queue_name, task_name, args, options) VALUES "
                "(gen_random_uuid(), 'default', 'free_run', '[\"x\"]', "
                "'{{\"limits\":[{{\"key\":\"refunds\",\"kind\":\"bucket\"}}]}}')",
                area.queue_table()));
  auto fine = producer.enqueue(free_run("fine"));
  start_node();
  CAF_CHECK(testkit::wait_until(
    [&] {
      return count("state = 'failed' AND error->>'type' = 'troupe::invalid_limit' AND "
                   "error->>'text' LIKE 'limiter \"payments\": unknown kind%'") == 1;
    },
    20s));
  CAF_CHECK(testkit::wait_until(
    [&] {
      return count("state = 'failed' AND error->>'type' = 'troupe::invalid_limit' AND "
                   "error->>'text' = 'limiter \"refunds\": limit null is not a whole number "
                   "from 1'") == 1;
    },
    20s));
  CAF_CHECK(testkit::wait_until(
    [&] { return count(fmt::format("message_id = '{}' AND state = 'done'", fine.id)) == 1; }, 20s));
}

CAF_TEST_FIXTURE_SCOPE_END()
