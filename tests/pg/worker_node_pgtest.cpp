#define CAF_SUITE worker_node
#include <caf/test/unit_test.hpp>

#include "scratch_area.hpp"
#include "storage/queries.hpp"
#include "troupe/caf.hpp"
#include "troupe/client.hpp"

#include <fmt/format.h>

#include <atomic>
#include <mutex>
#include <thread>

using namespace troupe;
using namespace std::chrono_literals;

namespace {

task_ref<int(int, int)> add{"add"};
task_ref<void(int)> nap{"nap"};
task_ref<void()> ghost{"ghost"}; // never registered on the node

std::atomic<int> naps_started{0};

task_ref<void()> gate{"gate"};
task_ref<void(std::string)> mark{"mark"};
std::atomic<bool> gate_open{false};
std::atomic<int> gate_started{0};
task_ref<int()> numbered{"numbered"};
std::atomic<int> numbered_runs{0};
std::mutex marks_mutex;
std::vector<std::string> marks; // the order in which mark tasks started

struct fixture {
  testkit::scratch_area area;
  client producer{client_options{area.dsn(), area.where()}};
  caf::actor_system_config cfg;
  std::unique_ptr<caf::actor_system> sys;
  std::shared_ptr<task_registry> tasks = std::make_shared<task_registry>();

  fixture() {
    sys = std::make_unique<caf::actor_system>(cfg);
    task_options keep;
    keep.store_results = true;
    tasks->define(
      add, [](int a, int b) { return a + b; }, keep);
    tasks->define(gate, [] {
      ++gate_started;
      while (!gate_open)
        std::this_thread::sleep_for(2ms);
    });
    tasks->define(mark, [](const std::string& tag) {
      std::lock_guard guard{marks_mutex};
      marks.push_back(tag);
    });
    // Returns the number of its run; the first run waits until a second one has started.
    tasks->define(
      numbered,
      [] {
        int run = ++numbered_runs;
        auto until = std::chrono::steady_clock::now() + 20s;
        while (run == 1 && numbered_runs < 2 && std::chrono::steady_clock::now() < until)
          std::this_thread::sleep_for(2ms);
        return run;
      },
      keep);
    tasks->define(nap, [](int ms) {
      ++naps_started;
      std::this_thread::sleep_for(std::chrono::milliseconds(ms));
    });
  }

  node_options options(std::int32_t concurrency = 4, std::int32_t prefetch = 8) {
    node_options o;
    o.dsn = area.dsn();
    o.area = area.where();
    o.name = "test-node";
    queue_options q;
    q.concurrency = concurrency;
    q.prefetch = prefetch;
    q.poll_interval = 10s; // long: these tests rely on notifications, not the poll
    o.queues.push_back(q);
    o.janitor_interval = 500ms;
    o.shutdown_grace = 5s;
    return o;
  }

  // Marking a claimed row running takes `seconds` per row (a trigger), so that a claim's
  // messages are handed out long before the claim commits.
  void slow_claims(double seconds) {
    area.sql().exec(fmt::format(R"(
      CREATE FUNCTION {0}.slow_claims() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN PERFORM pg_sleep({2}); RETURN NEW; END $$;
      CREATE TRIGGER slow_claims BEFORE UPDATE ON {1} FOR EACH ROW
        WHEN (NEW.state = 'running') EXECUTE FUNCTION {0}.slow_claims())",
                                storage::quote_identifier(area.where().schema), area.queue_table(),
                                seconds));
  }

  std::int64_t count(const std::string& where) {
    return area.scalar(fmt::format("SELECT count(*) FROM {} WHERE {}", area.queue_table(), where));
  }

  node_report stop(const node_actor& node) {
    caf::scoped_actor self{*sys};
    node_report out;
    self->request(node, 30s, stop_atom_v)
      .receive([&](const node_report& r) { out = r; },
               [&](caf::error& e) { CAF_FAIL("stop failed: " << describe(e)); });
    return out;
  }
};

} // namespace

CAF_TEST_FIXTURE_SCOPE(worker_node_tests, fixture)

CAF_TEST(a node runs published messages and stores their results) {
  auto node = spawn_worker_node(*sys, options(), tasks);
  std::vector<message> batch;
  for (int i = 0; i < 200; ++i)
    batch.push_back(add(i, 1));
  producer.enqueue_many(batch);
  CAF_CHECK(testkit::wait_until([&] { return count("state = 'done'") == 200; }, 20s));
  CAF_CHECK_EQUAL(count("state = 'done' AND result::int = (args->>0)::int + 1 AND attempts = 1"),
                  200);
  auto r = stop(node);
  CAF_CHECK_EQUAL(r.executed, 200);
  CAF_CHECK_EQUAL(count("state <> 'done'"), 0);
}

CAF_TEST(unknown tasks and undecodable arguments are failed with a reason) {
  auto node = spawn_worker_node(*sys, options(), tasks);
  auto lost = producer.enqueue(ghost());
  auto bad = add(1, 2);
  bad.args_json = R"(["one", 2])";
  producer.enqueue(bad);
  CAF_CHECK(testkit::wait_until([&] { return count("state = 'failed'") == 2; }, 20s));
  CAF_CHECK_EQUAL(count(fmt::format("message_id = '{}' AND error->>'type' = 'troupe::unknown_task' "
                                    "AND error->>'text' LIKE '%ghost%'",
                                    lost.id)),
                  1);
  CAF_CHECK_EQUAL(count(fmt::format("message_id = '{}' AND error->>'type' = "
                                    "'troupe::decode_failed'",
                                    bad.id)),
                  1);
  // The node goes on working.
  producer.enqueue(add(2, 2));
  CAF_CHECK(
    testkit::wait_until([&] { return count("state = 'done' AND result = '4'") == 1; }, 20s));
  stop(node);
}

CAF_TEST(a stale or malformed notification is ignored) {
  auto node = spawn_worker_node(*sys, options(), tasks);
  for (const char* payload : {"", "Not A Queue", "{\"message_id\":1}", "no_such_queue", "default"})
    area.sql().exec_params("SELECT pg_notify($1, $2)",
                           {storage::wake_channel(area.where()), payload}, "notify");
  producer.enqueue(add(20, 22));
  CAF_CHECK(
    testkit::wait_until([&] { return count("state = 'done' AND result = '42'") == 1; }, 20s));
  caf::scoped_actor self{*sys};
  bool alive = false;
  self->request(node, 5s, status_atom_v)
    .receive([&](const node_report& r) { alive = r.node_id > 0; }, [](caf::error&) {});
  CAF_CHECK(alive);
  stop(node);
}

CAF_TEST(delayed messages start after their delay and in priority order) {
  auto node = spawn_worker_node(*sys, options(1, 0), tasks);
  auto late = producer.enqueue(add(1, 1).with_delay(1200ms));
  // One batch, so both become due at the same instant and only their priorities differ.
  auto pair = producer.enqueue_many({add(3, 3).with_priority(10).with_delay(300ms),
                                     add(2, 2).with_priority(-10).with_delay(300ms)});
  auto& low = pair[0];
  auto& high = pair[1];
  CAF_CHECK(testkit::wait_until([&] { return count("state = 'done'") == 3; }, 20s));
  CAF_CHECK_EQUAL(count(fmt::format("message_id = '{}' AND started_at >= enqueued_at + "
                                    "interval '1.1 s'",
                                    late.id)),
                  1);
  CAF_CHECK_EQUAL(
    area.scalar(fmt::format("SELECT ((SELECT started_at FROM {0} WHERE message_id = '{1}') <= "
                            "(SELECT started_at FROM {0} WHERE message_id = '{2}'))::int",
                            area.queue_table(), high.id, low.id)),
    1);
  stop(node);
}

CAF_TEST(a delayed message starts on time beside a long task) {
  // One batch: the claim takes the long task and leaves three executors idle, so it must also
  // learn when the delayed message is due. Nothing else would wake the node before the long
  // task ends (3 s) or the poll (10 s).
  auto node = spawn_worker_node(*sys, options(4, 0), tasks);
  // A first message, run to the end, so that the node is idle and the batch below meets one
  // claim (woken by its notification).
  producer.enqueue(add(0, 0));
  CAF_REQUIRE(testkit::wait_until([&] { return count("state = 'done'") == 1; }, 20s));
  auto sent = producer.enqueue_many({nap(3000), add(5, 5)}, {{}, enqueue_options::delayed(400ms)});
  CAF_CHECK(testkit::wait_until(
    [&] { return count(fmt::format("message_id = '{}' AND state = 'done'", sent[1].id)) == 1; },
    2s));
  stop(node);
}

CAF_TEST(a delayed message is found while every executor is busy) {
  // Published before the node starts, so its first claim is its only one (no notification
  // follows). The one executor takes the long task, so that claim leaves none idle and does
  // not ask for the eta, and nothing is ready after it: the node must still learn when the
  // delayed message is due, and run it when the long task ends (about 1.5 s in), not at the
  // poll (60 s here, at least 54 with its jitter). The bound leaves a loaded machine time, and
  // stays far under the poll.
  auto sent = producer.enqueue_many({nap(1500), add(6, 6)}, {{}, enqueue_options::delayed(400ms)});
  auto o = options(1, 4);
  o.queues[0].poll_interval = 60s;
  auto node = spawn_worker_node(*sys, o, tasks);
  CAF_CHECK(testkit::wait_until(
    [&] { return count(fmt::format("message_id = '{}' AND state = 'done'", sent[1].id)) == 1; },
    30s));
  stop(node);
}

CAF_TEST(messages queued behind a long task move to an idle executor) {
  // Each executor gets its next messages before it finishes the one it runs. Published before
  // the node starts, so one claim takes all eight: the long task and a quick message on each
  // executor, then three quick messages queued behind each. The second executor finishes its
  // four and must take over the three queued behind the long task, not leave them waiting 5 s
  // (the bound leaves a loaded machine time, and stays under the long task).
  auto sent = producer.enqueue_many(
    {nap(5000), add(1, 1), add(2, 2), add(3, 3), add(4, 4), add(5, 5), add(6, 6), add(7, 7)});
  auto node = spawn_worker_node(*sys, options(2, 6), tasks);
  CAF_CHECK(testkit::wait_until([&] { return count("state = 'done'") == 7; }, 4s));
  CAF_CHECK_EQUAL(count(fmt::format("message_id = '{}' AND state = 'running'", sent[0].id)), 1);
  CAF_CHECK_EQUAL(count("attempts > 1"), 0);
  stop(node);
}

CAF_TEST(a graceful stop finishes running tasks and hands back prefetched ones) {
  auto node = spawn_worker_node(*sys, options(1, 5), tasks);
  naps_started = 0;
  std::vector<message> batch;
  for (int i = 0; i < 6; ++i)
    batch.push_back(nap(300));
  producer.enqueue_many(batch);
  CAF_CHECK(testkit::wait_until([&] { return naps_started >= 1; }, 10s));
  auto r = stop(node);
  CAF_CHECK_EQUAL(r.abandoned, 0);
  CAF_CHECK_EQUAL(count("state = 'running'"), 0);
  CAF_CHECK_EQUAL(count("state = 'done'"), r.executed);
  CAF_CHECK_EQUAL(count("state = 'queued' AND attempts = 0"), 6 - r.executed);
  CAF_CHECK(r.released >= 1);
  CAF_CHECK_EQUAL(area.scalar(fmt::format("SELECT count(*) FROM {}.nodes",
                                          storage::quote_identifier(area.where().schema))),
                  0);
}

CAF_TEST(the janitor vacuums the queue table once claims leave dead rows) {
  auto o = options();
  o.vacuum_dead_rows = 100;
  auto node = spawn_worker_node(*sys, o, tasks);
  std::vector<message> batch;
  for (int i = 0; i < 300; ++i)
    batch.push_back(add(i, 0));
  producer.enqueue_many(batch);
  CAF_CHECK(testkit::wait_until([&] { return count("state = 'done'") == 300; }, 30s));
  // The node's connections report their dead rows to the statistics within about 10 s.
  CAF_CHECK(testkit::wait_until(
    [&] {
      return area.scalar(fmt::format(
               "SELECT vacuum_count FROM pg_stat_user_tables WHERE relid = '{}'::regclass",
               area.queue_table())) >= 1;
    },
    30s));
  stop(node);
}

CAF_TEST(a task that ends before its claim is written has its outcome recorded) {
  // Marking a claimed row running takes 300 ms: the task (which starts once its row is
  // locked) ends long before its claim commits, and a completion written then would be refused.
  slow_claims(0.3);
  auto node = spawn_worker_node(*sys, options(), tasks);
  auto m = producer.enqueue(add(40, 2));
  CAF_CHECK(testkit::wait_until(
    [&] { return count(fmt::format("message_id = '{}' AND state = 'done'", m.id)) == 1; }, 20s));
  CAF_CHECK_EQUAL(count("state = 'done' AND result = '42' AND attempts = 1"), 1);
  auto r = stop(node);
  CAF_CHECK_EQUAL(r.executed, 1);
}

CAF_TEST(a stop during a claim hands back its messages once the claim is written) {
  // Marking each claimed row running takes 200 ms, so the stop comes while the claim's
  // messages are locked and the first one runs, but before any row is marked.
  slow_claims(0.2);
  naps_started = 0;
  std::vector<message> batch;
  for (int i = 0; i < 5; ++i)
    batch.push_back(nap(50));
  producer.enqueue_many(batch);
  auto node = spawn_worker_node(*sys, options(1, 8), tasks);
  CAF_CHECK(testkit::wait_until([&] { return naps_started >= 1; }, 10s));
  auto r = stop(node);
  // Nothing stays claimed: what ran is done, the rest is queued as if never claimed.
  CAF_CHECK_EQUAL(count("state = 'running'"), 0);
  CAF_CHECK_EQUAL(count("state = 'done' AND attempts = 1"), r.executed);
  CAF_CHECK_EQUAL(count("state = 'queued' AND attempts = 0"), 5 - r.executed);
  CAF_CHECK(r.executed >= 1);
  CAF_CHECK_EQUAL(r.released, 5 - r.executed);
}

CAF_TEST(a claim that fails after its messages started loses none of them) {
  // The first claim that marks rows running fails, after its messages were handed out.
  area.sql().exec(fmt::format(R"(
    CREATE SEQUENCE {0}.claims_seen;
    CREATE FUNCTION {0}.fail_first_claim() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      IF nextval('{0}.claims_seen') = 1 THEN RAISE EXCEPTION 'first claim refused'; END IF;
      RETURN NEW;
    END $$;
    CREATE TRIGGER fail_first_claim BEFORE UPDATE ON {1} FOR EACH ROW
      WHEN (NEW.state = 'running') EXECUTE FUNCTION {0}.fail_first_claim())",
                              storage::quote_identifier(area.where().schema), area.queue_table()));
  std::vector<message> batch;
  for (int i = 0; i < 20; ++i)
    batch.push_back(add(i, 1));
  producer.enqueue_many(batch);
  auto node = spawn_worker_node(*sys, options(2, 8), tasks);
  CAF_CHECK(testkit::wait_until([&] { return count("state = 'done'") == 20; }, 20s));
  // The failed claim was rolled back: each message counts the one delivery that was written.
  CAF_CHECK_EQUAL(count("state = 'done' AND result::int = (args->>0)::int + 1 AND attempts = 1"),
                  20);
  CAF_CHECK(area.scalar(fmt::format("SELECT last_value FROM {}.claims_seen",
                                    storage::quote_identifier(area.where().schema))) > 1);
  stop(node);
}

CAF_TEST(the outcome of an attempt whose claim never committed is never written) {
  // The first claim's commit ends its own connection: the node cannot know whether it
  // committed (it did not). Its message had already started; it is claimed again with the same
  // delivery token and runs a second time while the first run still runs.
  area.sql().exec(fmt::format(R"(
    CREATE SEQUENCE {0}.commits_seen;
    CREATE FUNCTION {0}.lose_first_commit() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      IF nextval('{0}.commits_seen') = 1 THEN PERFORM pg_terminate_backend(pg_backend_pid()); END IF;
      RETURN NULL;
    END $$;
    CREATE CONSTRAINT TRIGGER lose_first_commit AFTER UPDATE ON {1}
      DEFERRABLE INITIALLY DEFERRED FOR EACH ROW
      WHEN (NEW.state = 'running') EXECUTE FUNCTION {0}.lose_first_commit())",
                              storage::quote_identifier(area.where().schema), area.queue_table()));
  numbered_runs = 0;
  auto m = producer.enqueue(numbered());
  auto node = spawn_worker_node(*sys, options(2, 0), tasks);
  CAF_CHECK(testkit::wait_until(
    [&] { return count(fmt::format("message_id = '{}' AND state = 'done'", m.id)) == 1; }, 20s));
  CAF_CHECK(testkit::wait_until([&] { return numbered_runs == 2; }, 20s));
  stop(node);
  // The first run ended first, but only the second run's claim was written: its outcome is
  // the one stored.
  CAF_CHECK_EQUAL(count(fmt::format("message_id = '{}' AND result = '2' AND attempts = 1", m.id)),
                  1);
}

CAF_TEST(a claim that keeps failing is retried with a growing backoff) {
  // Every claim that marks rows running fails; the node tries again after 100, 200, 400 ms.
  area.sql().exec(fmt::format(R"(
    CREATE SEQUENCE {0}.claims_seen;
    CREATE FUNCTION {0}.refuse_claims() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN PERFORM nextval('{0}.claims_seen'); RAISE EXCEPTION 'claims refused'; END $$;
    CREATE TRIGGER refuse_claims BEFORE UPDATE ON {1} FOR EACH ROW
      WHEN (NEW.state = 'running') EXECUTE FUNCTION {0}.refuse_claims())",
                              storage::quote_identifier(area.where().schema), area.queue_table()));
  auto claims_seen = [&] {
    return area.scalar(fmt::format("SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM "
                                   "{}.claims_seen",
                                   storage::quote_identifier(area.where().schema)));
  };
  producer.enqueue(add(1, 1));
  auto node = spawn_worker_node(*sys, options(), tasks);
  CAF_CHECK(testkit::wait_until([&] { return claims_seen() >= 1; }, 10s));
  auto first = std::chrono::steady_clock::now();
  CAF_CHECK(testkit::wait_until([&] { return claims_seen() >= 4; }, 10s));
  auto waited = std::chrono::steady_clock::now() - first;
  CAF_CHECK(waited >= 650ms);
  CAF_MESSAGE("four failed claims took "
              << std::chrono::duration_cast<std::chrono::milliseconds>(waited).count() << " ms");
  stop(node);
  CAF_CHECK_EQUAL(count("state = 'queued' AND attempts = 0"), 1);
}

CAF_TEST(two nodes share a queue and never run a message twice) {
  auto a = spawn_worker_node(*sys, options(2, 4), tasks);
  auto b = spawn_worker_node(*sys, options(2, 4), tasks);
  std::vector<message> batch;
  for (int i = 0; i < 500; ++i)
    batch.push_back(add(i, 0));
  producer.enqueue_many(batch);
  CAF_CHECK(testkit::wait_until([&] { return count("state = 'done'") == 500; }, 30s));
  CAF_CHECK_EQUAL(count("attempts <> 1"), 0);
  auto ra = stop(a);
  auto rb = stop(b);
  CAF_CHECK_EQUAL(ra.executed + rb.executed, 500);
}

CAF_TEST(prefetched messages start by priority whatever order they were claimed in) {
  gate_open = false;
  gate_started = 0;
  marks.clear();
  auto node = spawn_worker_node(*sys, options(1, 2), tasks);
  producer.enqueue(gate());
  CAF_REQUIRE(testkit::wait_until([&] { return gate_started == 1; }, 10s));
  // The executor is busy: a priority-10 message is claimed first, then a priority-0 one.
  auto later = producer.enqueue(mark("priority 10").with_priority(10));
  CAF_REQUIRE(testkit::wait_until(
    [&] { return count(fmt::format("message_id = '{}' AND state = 'running'", later.id)) == 1; },
    10s));
  auto sooner = producer.enqueue(mark("priority 0").with_priority(0));
  CAF_REQUIRE(testkit::wait_until(
    [&] { return count(fmt::format("message_id = '{}' AND state = 'running'", sooner.id)) == 1; },
    10s));
  gate_open = true;
  CAF_REQUIRE(testkit::wait_until([&] { return count("state = 'done'") == 3; }, 10s));
  std::lock_guard guard{marks_mutex};
  CAF_CHECK_EQUAL(marks, (std::vector<std::string>{"priority 0", "priority 10"}));
  stop(node);
}

CAF_TEST(a CAF producer publishes through a storage pool without blocking) {
  auto pool = spawn_storage_pool(*sys, area.dsn(), area.where());
  caf::scoped_actor self{*sys};
  std::vector<message> batch{add(5, 5), add(6, 6)};
  std::vector<message> out;
  self->request(pool, 10s, enqueue_atom_v, batch, std::vector<enqueue_options>{})
    .receive([&](std::vector<message>& published) { out = std::move(published); },
             [&](caf::error& e) { CAF_FAIL(describe(e)); });
  CAF_REQUIRE_EQUAL(out.size(), 2u);
  CAF_CHECK_EQUAL(out[0].id, batch[0].id);
  CAF_CHECK_EQUAL(count("state = 'queued'"), 2);
  self->send_exit(pool, caf::exit_reason::user_shutdown);
}

CAF_TEST(a node answers ready once it claims and refuses it once stopped) {
  auto node = spawn_worker_node(*sys, options(), tasks);
  caf::scoped_actor self{*sys};
  node_report ready;
  self->request(node, 10s, ready_atom_v)
    .receive([&](const node_report& r) { ready = r; },
             [&](caf::error& e) { CAF_FAIL("not ready: " << describe(e)); });
  CAF_CHECK(ready.node_id > 0);
  CAF_CHECK_EQUAL(ready.name, "test-node");
  CAF_CHECK_EQUAL(
    area.scalar(fmt::format("SELECT count(*) FROM {}.nodes WHERE node_id = {}",
                            storage::quote_identifier(area.where().schema), ready.node_id)),
    1);
  // A message published now is claimed by the node that said it is ready.
  auto m = producer.enqueue(add(1, 2));
  CAF_CHECK(testkit::wait_until(
    [&] { return count(fmt::format("message_id = '{}' AND state = 'done'", m.id)) == 1; }, 10s));
  // Asking again answers at once.
  self->request(node, 1s, ready_atom_v)
    .receive([&](const node_report& r) { CAF_CHECK_EQUAL(r.node_id, ready.node_id); },
             [&](caf::error& e) { CAF_FAIL(describe(e)); });
  stop(node);
  bool refused = false;
  self->request(node, 5s, ready_atom_v)
    .receive([&](const node_report&) {}, [&](caf::error&) { refused = true; });
  CAF_CHECK(refused);
}

CAF_TEST_FIXTURE_SCOPE_END()
