#define CAF_SUITE publishing
#include <caf/test/unit_test.hpp>

#include "scratch_area.hpp"
#include "storage/queries.hpp"
#include "troupe/async_transactional.hpp"
#include "troupe/caf.hpp"
#include "troupe/client.hpp"
#include "troupe/error.hpp"
#include "troupe/task.hpp"
#include "troupe/transactional.hpp"

#include <fmt/format.h>
#include <libpq-fe.h>
#include <poll.h>

#include <atomic>
#include <cctype>
#include <set>
#include <thread>

using namespace troupe;
using namespace std::chrono_literals;

namespace {

task_ref<void(int)> job{"job"};

// Counts the enqueue hooks that ran.
struct hook_counter : middleware {
  std::atomic<int> before{0};
  std::atomic<int> after{0};
  std::string name() const override { return "hook_counter"; }
  void before_enqueue(message&) override { ++before; }
  void after_enqueue(const message&) override { ++after; }
};

struct fixture {
  testkit::scratch_area area;
  std::shared_ptr<hook_counter> hooks = std::make_shared<hook_counter>();
  client producer{client_options{area.dsn(), area.where(), "troupe-test", {hooks}}};

  std::int64_t rows(const std::string& where = "true") {
    return area.scalar(fmt::format("SELECT count(*) FROM {} WHERE {}", area.queue_table(), where));
  }
  std::int64_t keys(const std::string& where = "true") {
    return area.scalar(fmt::format("SELECT count(*) FROM {}.deduplication WHERE {}",
                                   storage::quote_identifier(area.where().schema), where));
  }
  static enqueue_options key(const std::string& k, std::chrono::milliseconds ttl = 60s) {
    return enqueue_options::deduplicated(k, ttl);
  }
  // The code and text of the troupe::error `f` throws.
  template <class F>
  std::pair<errc, std::string> failure_of(F&& f) {
    try {
      f();
    } catch (const error& e) {
      return {e.code(), e.what()};
    }
    CAF_FAIL("expected a troupe::error");
    return {errc::bug, ""};
  }
};

bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

} // namespace

CAF_TEST_FIXTURE_SCOPE(publishing_tests, fixture)

CAF_TEST(bad options are refused before any database access) {
  // A client whose server does not exist: only a refusal that needs no connection can come back
  // as invalid_argument.
  client nowhere{client_options{"host=127.0.0.1 port=1 connect_timeout=2", area.where()}};
  auto [code1, text1] = failure_of([&] { nowhere.enqueue_many({job(1), job(2)}, {key("a")}); });
  CAF_CHECK(code1 == errc::invalid_argument);
  CAF_CHECK(has(text1, "options must match messages: 2 messages, 1 options entries"));
  auto [code2, text2] = failure_of([&] { nowhere.enqueue(job(1), key("a", 0ms)); });
  CAF_CHECK(code2 == errc::invalid_argument);
  CAF_CHECK(has(text2, "invalid enqueue options for message 0"));
  CAF_CHECK(has(text2, "deduplication_ttl must be a positive number"));
  enqueue_options ttl_only;
  ttl_only.deduplication_ttl = 5s;
  auto [code3, text3] = failure_of([&] { nowhere.enqueue_many({job(1), job(2)}, {{}, ttl_only}); });
  CAF_CHECK(has(text3, "invalid enqueue options for message 1: deduplication_ttl given without"));
  auto [code4, text4] =
    failure_of([&] { nowhere.enqueue(job(1), enqueue_options::delayed(-5ms)); });
  CAF_CHECK(has(text4, "delay must be between 0 and 315360000000 ms (ten years), got -5 ms"));
  std::vector<message> too_many(max_batch_size + 1, job(1));
  auto [code5, text5] = failure_of([&] { nowhere.enqueue_many(too_many); });
  CAF_CHECK(code5 == errc::invalid_argument);
  CAF_CHECK(has(text5, "batch limit is 1000 messages"));
  // An empty batch runs no SQL, so it succeeds even without a server.
  CAF_CHECK(nowhere.enqueue_many({}).empty());
  // And the reachable area holds nothing.
  CAF_CHECK_EQUAL(rows(), 0);
}

CAF_TEST(a batch of 1000 is accepted in input order) {
  std::vector<message> batch;
  for (int i = 0; i < 1000; ++i)
    batch.push_back(job(i));
  auto out = producer.enqueue_many(batch);
  CAF_REQUIRE_EQUAL(out.size(), 1000u);
  for (std::size_t i = 0; i < out.size(); ++i)
    CAF_CHECK_EQUAL(out[i].id, batch[i].id);
  CAF_CHECK_EQUAL(rows(), 1000);
}

CAF_TEST(a large batch stores every field as given) {
  // Batches from bulk_threshold messages up are written with a binary COPY: every field must
  // arrive as an INSERT would store it.
  const std::string args = R"(["tab\there", "line\nbreak", "quote \" and \\ backslash", "é✓", )"
                           R"(12345678901234567890, {"nested": [true, null, 1.5e3]}])";
  std::vector<message> batch;
  for (int i = 0; i < 40; ++i) {
    auto m = job(i).with_priority(i % 3 - 1).on_queue(i % 2 ? "bulk.odd" : "bulk-even");
    m.task = "tâche_" + std::to_string(i);
    m.args_json = args;
    m.options_json = R"({"max_retries": 3, "note": "a\tb"})";
    m.timestamp_ms = 1'700'000'000'123 + i;
    batch.push_back(m);
  }
  // An id spelled in upper case with braces is stored as the same UUID.
  std::string canonical;
  CAF_REQUIRE(parse_uuid(batch[5].id, canonical));
  for (auto& c : batch[5].id)
    c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  batch[5].id = "{" + batch[5].id + "}";
  producer.enqueue_many(batch);
  CAF_CHECK_EQUAL(rows(), 40);
  for (int i = 0; i < 40; ++i) {
    const auto& m = batch[static_cast<std::size_t>(i)];
    std::string id;
    CAF_REQUIRE(parse_uuid(m.id, id));
    CAF_CHECK_EQUAL(
      rows(fmt::format("message_id = '{}' AND queue_name = '{}' AND task_name = $t${}$t$ "
                       "AND args = $j${}$j$::jsonb AND options = $j${}$j$::jsonb AND priority = {} "
                       "AND (extract(epoch FROM enqueued_at) * 1000)::bigint = {} "
                       "AND state = 'queued' AND attempts = 0 AND eta <= now()",
                       id, m.queue, m.task, m.args_json, m.options_json, m.priority,
                       m.timestamp_ms)),
      1);
  }
  CAF_CHECK_EQUAL(rows(fmt::format("message_id = '{}'", canonical)), 1);
  // Without options and priorities, the rows hold the column defaults, as an INSERT's do.
  std::vector<message> plain;
  for (int i = 0; i < 40; ++i) {
    auto m = job(i).on_queue("bulk-plain");
    m.args_json = args;
    m.timestamp_ms = 1'700'000'000'456 + i;
    plain.push_back(m);
  }
  producer.enqueue_many(plain);
  for (const auto& m : plain)
    CAF_CHECK_EQUAL(
      rows(fmt::format("message_id = '{}' AND queue_name = 'bulk-plain' AND task_name = 'job' "
                       "AND args = $j${}$j$::jsonb AND options = '{{}}'::jsonb AND priority = 0 "
                       "AND (extract(epoch FROM enqueued_at) * 1000)::bigint = {} "
                       "AND state = 'queued' AND attempts = 0 AND eta <= now()",
                       m.id, m.args_json, m.timestamp_ms)),
      1);
  CAF_CHECK_EQUAL(rows(), 80);
}

CAF_TEST(ids are accepted exactly when PostgreSQL accepts them) {
  // Large batches send ids as bytes (COPY), small ones as text (uuid input): both must take
  // the same spellings, so the client accepts exactly what uuid input does.
  for (const char* id :
       {"0190f1e2-aaaa-7bbb-8ccc-0123456789ab", "0190F1E2-AAAA-7BBB-8CCC-0123456789AB",
        "{0190f1e2-aaaa-7bbb-8ccc-0123456789ab}", "0190f1e2aaaa7bbb8ccc0123456789ab",
        "0190f1e2-aaaa7bbb-8ccc0123-456789ab", "0-190f1e2aaaa-7bbb-8ccc-0123456789ab",
        "0190f1e2--aaaa7bbb8ccc0123456789ab", "-0190f1e2aaaa7bbb8ccc0123456789ab",
        "0190f1e2aaaa7bbb8ccc0123456789ab-", "{0190f1e2aaaa7bbb8ccc0123456789ab",
        "0190f1e2aaaa7bbb8ccc0123456789ab}", "0190f1e2aaaa7bbb8ccc0123456789a",
        "0190f1e2aaaa7bbb8ccc0123456789abc", "0190f1e2 aaaa7bbb8ccc0123456789ab", ""}) {
    std::string canonical;
    bool ours = parse_uuid(id, canonical);
    bool postgres = true;
    try {
      area.sql().exec_params("SELECT $1::uuid", {std::string(id)}, "uuid input");
    } catch (const error&) {
      postgres = false;
    }
    CAF_CHECK_EQUAL(ours, postgres);
    if (ours != postgres)
      CAF_MESSAGE("differs on \"" << id << "\"");
  }
}

CAF_TEST(a publish returns the id as stored whatever spelling the caller gave) {
  auto spelled = [](std::string id) {
    auto m = job(1);
    m.id = std::move(id);
    return m;
  };
  auto canonical = "0190f1e2-aaaa-7bbb-8ccc-0123456789ab";
  auto one = producer.enqueue(spelled("{0190F1E2-AAAA-7BBB-8CCC-0123456789AB}"));
  CAF_CHECK_EQUAL(one.id, canonical);
  CAF_CHECK_EQUAL(area.scalar(fmt::format("SELECT count(*) FROM {} WHERE message_id::text = '{}'",
                                          area.queue_table(), one.id)),
                  1);
  // In a batch, with a key, and through COPY (32 messages or more): the same.
  std::vector<message> batch;
  for (int i = 0; i < 40; ++i)
    batch.push_back(spelled(fmt::format("{{0190F1E2-AAAA-7BBB-8CCC-0123456789{:02X}}}", i)));
  auto out = producer.enqueue_many(batch);
  CAF_REQUIRE_EQUAL(out.size(), batch.size());
  for (int i = 0; i < 40; ++i)
    CAF_CHECK_EQUAL(out[static_cast<std::size_t>(i)].id,
                    fmt::format("0190f1e2-aaaa-7bbb-8ccc-0123456789{:02x}", i));
  auto keyed = producer.enqueue(spelled("0190F1E2AAAA7BBB8CCC0123456789FF"), key("spelled"));
  CAF_CHECK_EQUAL(keyed.id, "0190f1e2-aaaa-7bbb-8ccc-0123456789ff");
  // A duplicate of it returns the stored spelling too.
  CAF_CHECK_EQUAL(producer.enqueue(job(2), key("spelled")).id, keyed.id);
}

CAF_TEST(a large batch puts back a message whose id is stored) {
  std::vector<message> first;
  for (int i = 0; i < 40; ++i)
    first.push_back(job(i));
  producer.enqueue_many(first);
  area.sql().exec(
    fmt::format("UPDATE {} SET state = 'done', finished_at = now() WHERE message_id = '{}'",
                area.queue_table(), first[7].id));
  // Sent again with new messages: the COPY meets the stored id and the upsert takes over.
  std::vector<message> again{first[7]};
  for (int i = 0; i < 39; ++i)
    again.push_back(job(100 + i));
  auto out = producer.enqueue_many(again);
  CAF_CHECK_EQUAL(out.size(), 40u);
  CAF_CHECK_EQUAL(rows(), 79);
  CAF_CHECK_EQUAL(rows(fmt::format("message_id = '{}' AND state = 'queued'", first[7].id)), 1);
  CAF_CHECK_EQUAL(rows("state = 'queued'"), 79);
}

CAF_TEST(a large batch the database refuses writes nothing and says why) {
  std::vector<message> batch;
  for (int i = 0; i < 40; ++i)
    batch.push_back(job(i));
  batch[31].args_json = "[1, 2"; // not JSON
  auto [code, text] = failure_of([&] { producer.enqueue_many(batch); });
  CAF_CHECK(code != errc::connection_lost);
  CAF_CHECK(has(text, "json"));
  CAF_CHECK_EQUAL(rows(), 0);
  // The client's connection is fine afterwards.
  batch[31].args_json = "[31]";
  producer.enqueue_many(batch);
  CAF_CHECK_EQUAL(rows(), 40);
}

CAF_TEST(a large batch with a delayed message keeps that delay only) {
  std::vector<message> batch;
  for (int i = 0; i < 40; ++i)
    batch.push_back(job(i));
  std::vector<enqueue_options> options(40);
  options[3] = enqueue_options::delayed(60s);
  producer.enqueue_many(batch, options);
  CAF_CHECK_EQUAL(
    rows(fmt::format("message_id = '{}' AND eta > now() + interval '50 seconds'", batch[3].id)), 1);
  CAF_CHECK_EQUAL(rows("eta <= now()"), 39);
}

CAF_TEST(a delay option sets the eta of its message only) {
  auto out = producer.enqueue_many({job(1), job(2)}, {enqueue_options::delayed(60s), {}});
  CAF_CHECK_EQUAL(out[0].delay_ms, 60000);
  CAF_CHECK_EQUAL(out[1].delay_ms, 0);
  CAF_CHECK_EQUAL(
    rows(fmt::format("message_id = '{}' AND eta > now() + interval '50 seconds'", out[0].id)), 1);
  CAF_CHECK_EQUAL(rows(fmt::format("message_id = '{}' AND eta <= now()", out[1].id)), 1);
}

CAF_TEST(a duplicate returns the original message and writes nothing) {
  auto original = producer.enqueue(job(1).with_delay(5s), key("order-7"));
  CAF_CHECK_EQUAL(hooks->before.load(), 1);
  CAF_CHECK_EQUAL(hooks->after.load(), 1);
  auto again = producer.enqueue(job(2), key("order-7"));
  CAF_CHECK_EQUAL(again.id, original.id);
  CAF_CHECK_EQUAL(again.args_json, original.args_json);
  CAF_CHECK_EQUAL(again.delay_ms, 5000);
  CAF_CHECK_EQUAL(again.timestamp_ms, original.timestamp_ms);
  CAF_CHECK_EQUAL(rows(), 1);
  // No enqueue hook ran for the duplicate.
  CAF_CHECK_EQUAL(hooks->before.load(), 1);
  CAF_CHECK_EQUAL(hooks->after.load(), 1);
  // The same key on another queue is another key.
  auto elsewhere = producer.enqueue(job(3).on_queue("other"), key("order-7"));
  CAF_CHECK_NOT_EQUAL(elsewhere.id, original.id);
  CAF_CHECK_EQUAL(rows(), 2);
}

CAF_TEST(a duplicate returns the message as a hook changed it) {
  // A before_enqueue hook runs after the key is claimed: the stored message must be the one
  // published, with the hook's change.
  struct stamp : middleware {
    std::string name() const override { return "stamp"; }
    void before_enqueue(message& m) override { m.options_json = R"({"stamped":true})"; }
  };
  client stamping{
    client_options{area.dsn(), area.where(), "troupe-test", {std::make_shared<stamp>()}}};
  auto published = stamping.enqueue(job(1), key("stamped"));
  CAF_CHECK_EQUAL(published.options_json, R"({"stamped":true})");
  auto again = producer.enqueue(job(2), key("stamped"));
  CAF_CHECK_EQUAL(again.id, published.id);
  CAF_CHECK_EQUAL(again.options_json, R"({"stamped": true})"); // as jsonb prints it
}

CAF_TEST(a batch mixes new messages and duplicates in input order) {
  auto held = producer.enqueue(job(0), key("a"));
  hooks->before = 0;
  hooks->after = 0;
  storage::connection listener = storage::connection::open(area.dsn(), "listener");
  listener.exec("LISTEN " + storage::quote_identifier(storage::wake_channel(area.where())));
  std::vector<message> batch{job(1), job(2), job(3), job(4)};
  auto out = producer.enqueue_many(batch, {key("a"), key("b"), {}, key("b")});
  CAF_REQUIRE_EQUAL(out.size(), 4u);
  CAF_CHECK_EQUAL(out[0].id, held.id); // held by an earlier publish
  CAF_CHECK_EQUAL(out[0].args_json, "[0]");
  CAF_CHECK_EQUAL(out[1].id, batch[1].id); // new key
  CAF_CHECK_EQUAL(out[2].id, batch[2].id); // no key
  CAF_CHECK_EQUAL(out[3].id, batch[1].id); // the same key earlier in the batch
  CAF_CHECK_EQUAL(rows(), 3);
  CAF_CHECK_EQUAL(keys(), 2);
  CAF_CHECK_EQUAL(hooks->before.load(), 2);
  CAF_CHECK_EQUAL(hooks->after.load(), 2);
  // One notification for the queue.
  int notes = 0;
  testkit::wait_until(
    [&] {
      listener.exec("SELECT 1");
      while (PGnotify* n = PQnotifies(listener.native())) {
        ++notes;
        PQfreemem(n);
      }
      return notes > 0;
    },
    2s);
  CAF_CHECK_EQUAL(notes, 1);
  // A batch of duplicates only writes no row and sends no notification.
  auto dups = producer.enqueue_many({job(5), job(6)}, {key("a"), key("b")});
  CAF_CHECK_EQUAL(dups[0].id, held.id);
  CAF_CHECK_EQUAL(dups[1].id, batch[1].id);
  CAF_CHECK_EQUAL(rows(), 3);
  listener.exec("SELECT pg_sleep(0.1)");
  CAF_CHECK(PQnotifies(listener.native()) == nullptr);
}

CAF_TEST(eight threads publishing one key create exactly one message) {
  constexpr int threads = 8;
  std::vector<std::unique_ptr<client>> clients;
  for (int i = 0; i < threads; ++i) {
    clients.push_back(std::make_unique<client>(client_options{area.dsn(), area.where()}));
    // Open each connection before the race: looking up an unknown result does.
    try {
      clients.back()->get_result_json(new_message_id());
    } catch (const result_error&) {
    }
  }
  std::atomic<int> ready{0};
  std::atomic<bool> go{false};
  std::vector<std::string> ids(threads);
  std::vector<std::thread> workers;
  for (int i = 0; i < threads; ++i)
    workers.emplace_back([&, i] {
      auto m = job(i);
      ++ready;
      while (!go.load())
        std::this_thread::yield();
      ids[i] = clients[i]->enqueue(m, key("same")).id;
    });
  while (ready.load() < threads)
    std::this_thread::yield();
  go = true;
  for (auto& w : workers)
    w.join();
  CAF_CHECK_EQUAL(rows(), 1);
  std::set<std::string> distinct(ids.begin(), ids.end());
  CAF_CHECK_EQUAL(distinct.size(), 1u);
  CAF_CHECK_EQUAL(rows(fmt::format("message_id = '{}'", *distinct.begin())), 1);
}

CAF_TEST(an expired key can publish again and expired keys are removable) {
  auto first = producer.enqueue(job(1), key("short", 300ms));
  CAF_CHECK_EQUAL(producer.enqueue(job(2), key("short", 300ms)).id, first.id);
  message second;
  CAF_CHECK(testkit::wait_until(
    [&] {
      second = producer.enqueue(job(3), key("short", 60s));
      return second.id != first.id;
    },
    5s));
  CAF_CHECK_EQUAL(rows(), 2);
  CAF_CHECK_EQUAL(keys(fmt::format("message_id = '{}'", second.id)), 1);
  // Expired rows are pruned (the janitor's pass does this), live ones stay.
  producer.enqueue(job(4), key("gone", 1ms));
  CAF_CHECK(testkit::wait_until([&] { return keys("expires_at <= clock_timestamp()") == 1; }, 2s));
  auto pruned = storage::prune_deduplication_keys(area.sql(), area.statements(), 1000);
  CAF_CHECK_EQUAL(pruned, 1);
  CAF_CHECK_EQUAL(keys(), 1);
  auto pass = storage::reap_dead_nodes(area.sql(), area.statements(), 3s);
  CAF_CHECK_EQUAL(pass.pruned_keys, 0);
}

CAF_TEST(purging the queue rows does not release a live key) {
  auto original = producer.enqueue(job(1), key("k"));
  area.sql().exec(fmt::format("DELETE FROM {}", area.queue_table()));
  auto again = producer.enqueue(job(2), key("k"));
  CAF_CHECK_EQUAL(again.id, original.id);
  CAF_CHECK_EQUAL(rows(), 0);
}

CAF_TEST(a deduplicated publish in a transaction that rolls back frees its key) {
  auto caller = storage::connection::open(area.dsn(), "caller");
  caller.exec("BEGIN");
  auto first = enqueue_in_transaction(caller.native(), area.where(), job(1), key("tx"));
  caller.exec("ROLLBACK");
  CAF_CHECK_EQUAL(keys(), 0);
  caller.exec("BEGIN");
  auto second = enqueue_many_in_transaction(caller.native(), area.where(), {job(2), job(3)},
                                            {key("tx"), key("tx")});
  caller.exec("COMMIT");
  CAF_CHECK_NOT_EQUAL(second[0].id, first.id);
  CAF_CHECK_EQUAL(second[1].id, second[0].id);
  CAF_CHECK_EQUAL(rows(), 1);
  CAF_CHECK_EQUAL(producer.enqueue(job(4), key("tx")).id, second[0].id);
}

CAF_TEST(a failed deduplicated publish keeps the caller transaction usable) {
  auto caller = storage::connection::open(area.dsn(), "caller");
  caller.exec(
    fmt::format("CREATE TABLE {}.orders (id int)", storage::quote_identifier(area.where().schema)));
  caller.exec("BEGIN");
  caller.exec(fmt::format("INSERT INTO {}.orders VALUES (1)",
                          storage::quote_identifier(area.where().schema)));
  auto bad = job(1);
  bad.args_json = "[not json"; // refused by PostgreSQL, after the key was claimed
  auto [code, text] =
    failure_of([&] { enqueue_in_transaction(caller.native(), area.where(), bad, key("x")); });
  CAF_CHECK_NOT_EQUAL(text, "");
  caller.exec("COMMIT");
  CAF_CHECK_EQUAL(area.scalar(fmt::format("SELECT count(*) FROM {}.orders",
                                          storage::quote_identifier(area.where().schema))),
                  1);
  CAF_CHECK_EQUAL(keys(), 0);
  CAF_CHECK_EQUAL(rows(), 0);
}

CAF_TEST(actors publish batches with options through the storage pool) {
  caf::actor_system_config cfg;
  caf::actor_system sys{cfg};
  auto pool = spawn_storage_pool(sys, area.dsn(), area.where());
  caf::scoped_actor self{sys};
  std::vector<message> first;
  self
    ->request(pool, 10s, enqueue_atom_v, std::vector<message>{job(1), job(2)},
              std::vector<enqueue_options>{key("p"), enqueue_options::delayed(30s)})
    .receive([&](std::vector<message>& out) { first = std::move(out); },
             [&](caf::error& e) { CAF_FAIL("publish failed: " << describe(e)); });
  CAF_REQUIRE_EQUAL(first.size(), 2u);
  CAF_CHECK_EQUAL(first[1].delay_ms, 30000);
  std::vector<message> second;
  self
    ->request(pool, 10s, enqueue_atom_v, std::vector<message>{job(3)},
              std::vector<enqueue_options>{key("p")})
    .receive([&](std::vector<message>& out) { second = std::move(out); },
             [&](caf::error& e) { CAF_FAIL("publish failed: " << describe(e)); });
  CAF_CHECK_EQUAL(second.at(0).id, first[0].id);
  std::string refused;
  self
    ->request(pool, 10s, enqueue_atom_v, std::vector<message>{job(4)},
              std::vector<enqueue_options>{key("p", 0ms)})
    .receive([&](std::vector<message>&) { refused = "accepted"; },
             [&](caf::error& e) { refused = describe(e); });
  CAF_CHECK(has(refused, "invalid_argument: invalid enqueue options for message 0"));
  CAF_CHECK_EQUAL(rows(), 2);
  self->send_exit(pool, caf::exit_reason::user_shutdown);
}

CAF_TEST(the storage pool refuses a bad batch before any database access) {
  // A pool whose server does not exist: only answers that need no connection come back.
  caf::actor_system_config cfg;
  caf::actor_system sys{cfg};
  auto pool = spawn_storage_pool(sys, "host=127.0.0.1 port=1 connect_timeout=2", area.where());
  caf::scoped_actor self{sys};
  auto ask = [&](std::vector<message> batch, std::vector<enqueue_options> options) {
    std::string answer;
    self->request(pool, 10s, enqueue_atom_v, std::move(batch), std::move(options))
      .receive([&](std::vector<message>& out) { answer = fmt::format("{} published", out.size()); },
               [&](caf::error& e) { answer = describe(e); });
    return answer;
  };
  std::vector<message> too_many(max_batch_size + 1, job(1));
  CAF_CHECK(has(ask(too_many, {}), "invalid_argument: batch limit is 1000 messages"));
  CAF_CHECK(has(ask({job(1)}, {enqueue_options::delayed(-5ms)}),
                "invalid_argument: invalid enqueue options for message 0"));
  CAF_CHECK(has(ask({job(1), job(2)}, {key("a")}), "invalid_argument: options must match"));
  CAF_CHECK_EQUAL(ask({}, {}), "0 published");
  // What needs the database gets the lost connection.
  CAF_CHECK(has(ask({job(1)}, {}), "connection_lost"));
  self->send_exit(pool, caf::exit_reason::user_shutdown);
}

CAF_TEST_FIXTURE_SCOPE_END()

// The asynchronous publish from CAF actors. The actor system has one scheduler thread: an
// actor that blocked it would stop every other actor from answering.
namespace {

struct async_fixture : fixture {
  caf::actor_system_config cfg;
  std::optional<caf::actor_system> sys;
  std::optional<async_publisher_actor> publisher;
  storage::connection caller = storage::connection::open(area.dsn(), "caller");
  storage::connection holder = storage::connection::open(area.dsn(), "holder");
  std::string orders;

  async_fixture() {
    cfg.set("scheduler.max-threads", 1);
    sys.emplace(cfg);
    publisher = spawn_async_publisher(*sys, area.where());
    orders = storage::quote_identifier(area.where().schema) + ".orders";
    area.sql().exec("CREATE TABLE " + orders + " (id int)");
  }
  ~async_fixture() {
    caf::scoped_actor self{*sys};
    self->send_exit(*publisher, caf::exit_reason::user_shutdown);
  }

  // Whether the caller's backend waits on a lock (its publish is stuck behind the holder).
  bool caller_waits() {
    return area.scalar(fmt::format("SELECT count(*) FROM pg_stat_activity WHERE pid = {} AND "
                                   "wait_event_type = 'Lock'",
                                   caller.backend_pid())) == 1;
  }
};

// Publishes on `conn` through the publisher when told, reports the outcome to `report_to`, and
// answers pings all the while. (A function with arguments: see asker_impl in results.)
caf::behavior publishing_actor(caf::event_based_actor* me, async_publisher_actor publisher,
                               caller_connection conn, caf::actor report_to) {
  return {
    [=](caf::put_atom, message& m, enqueue_options& o) {
      me->request(publisher, caf::infinite, enqueue_atom_v, conn, std::move(m), std::move(o))
        .then([=](const message& out) { me->send(report_to, out.id); },
              [=](caf::error& e) { me->send(report_to, describe(e)); });
    },
    [=](cancel_atom) { me->send(publisher, cancel_atom_v, conn); },
    [=](caf::ping_atom) { return caf::pong_atom::value; },
  };
}

caf::behavior ponger(caf::event_based_actor*, int) {
  return {[](caf::ping_atom) { return caf::pong_atom::value; }};
}

} // namespace

CAF_TEST_FIXTURE_SCOPE(async_publishing_tests, async_fixture)

CAF_TEST(an asynchronous publish waits without blocking any actor) {
  // The holder claims the key first and keeps its transaction open: the caller's publish of
  // the same key has to wait for it.
  holder.exec("BEGIN");
  auto held = enqueue_in_transaction(holder.native(), area.where(), job(1), key("receipt-9"));
  caller.exec("BEGIN");
  caller.exec("INSERT INTO " + orders + " VALUES (9)");
  PQsetnonblocking(caller.native(), 1);
  caf::scoped_actor self{*sys};
  auto actor = sys->spawn(publishing_actor, *publisher, caller_connection{caller.native()},
                          caf::actor_cast<caf::actor>(self));
  auto other = sys->spawn(ponger, 0);
  self->send(actor, caf::put_atom::value, job(2), key("receipt-9"));
  CAF_REQUIRE(testkit::wait_until([&] { return caller_waits(); }, 5s));
  // Both the publishing actor and another actor keep answering while the publish waits.
  for (int i = 0; i < 5; ++i) {
    int pongs = 0;
    self->request(actor, 1s, caf::ping_atom::value)
      .receive([&](caf::pong_atom) { ++pongs; }, [](caf::error&) {});
    self->request(other, 1s, caf::ping_atom::value)
      .receive([&](caf::pong_atom) { ++pongs; }, [](caf::error&) {});
    CAF_CHECK_EQUAL(pongs, 2);
  }
  CAF_CHECK(caller_waits());
  holder.exec("COMMIT");
  std::string got;
  self->receive([&](const std::string& id) { got = id; },
                caf::after(10s) >> [&] { got = "no reply"; });
  // The holder's message came back: the key was live.
  CAF_CHECK_EQUAL(got, held.id);
  PQsetnonblocking(caller.native(), 0);
  caller.exec("COMMIT");
  CAF_CHECK_EQUAL(rows(), 1);
  CAF_CHECK_EQUAL(area.scalar("SELECT count(*) FROM " + orders), 1);
  self->send_exit(actor, caf::exit_reason::user_shutdown);
  self->send_exit(other, caf::exit_reason::user_shutdown);
}

CAF_TEST(an asynchronous publish commits with the caller transaction) {
  caller.exec("BEGIN");
  PQsetnonblocking(caller.native(), 1);
  caf::scoped_actor self{*sys};
  std::vector<message> out;
  self
    ->request(*publisher, 10s, enqueue_atom_v, caller_connection{caller.native()},
              std::vector<message>{job(1), job(2)},
              std::vector<enqueue_options>{{}, enqueue_options::delayed(20s)})
    .receive([&](std::vector<message>& x) { out = std::move(x); },
             [&](caf::error& e) { CAF_FAIL("publish failed: " << describe(e)); });
  CAF_REQUIRE_EQUAL(out.size(), 2u);
  CAF_CHECK_EQUAL(rows(), 0); // not committed yet
  PQsetnonblocking(caller.native(), 0);
  caller.exec("COMMIT");
  CAF_CHECK_EQUAL(rows(), 2);
  CAF_CHECK_EQUAL(rows("eta > now() + interval '10 seconds'"), 1);
}

CAF_TEST(a cancelled asynchronous batch rolls back and the transaction stays usable) {
  holder.exec("BEGIN");
  enqueue_in_transaction(holder.native(), area.where(), job(1), key("slow"));
  caller.exec("BEGIN");
  caller.exec("INSERT INTO " + orders + " VALUES (1)");
  PQsetnonblocking(caller.native(), 1);
  caf::scoped_actor self{*sys};
  auto actor = sys->spawn(publishing_actor, *publisher, caller_connection{caller.native()},
                          caf::actor_cast<caf::actor>(self));
  self->send(actor, caf::put_atom::value, job(2), key("slow"));
  CAF_REQUIRE(testkit::wait_until([&] { return caller_waits(); }, 5s));
  self->send(actor, cancel_atom_v);
  std::string got;
  self->receive([&](const std::string& text) { got = text; },
                caf::after(10s) >> [&] { got = "no reply"; });
  CAF_CHECK(has(got, "cancelled: publish cancelled by the caller"));
  holder.exec("ROLLBACK");
  PQsetnonblocking(caller.native(), 0);
  caller.exec("COMMIT"); // the order survives the cancelled publish
  CAF_CHECK_EQUAL(area.scalar("SELECT count(*) FROM " + orders), 1);
  CAF_CHECK_EQUAL(rows(), 0);
  CAF_CHECK_EQUAL(keys(), 0);
  self->send_exit(actor, caf::exit_reason::user_shutdown);
}

CAF_TEST(a hook refusing an asynchronous deduplicated batch frees its keys) {
  // With keys, before_enqueue runs once the keys are claimed: its refusal must roll the claims
  // back with the savepoint, or the caller's commit would keep keys no message holds.
  struct refuse : middleware {
    std::string name() const override { return "refuse"; }
    void before_enqueue(message&) override { throw std::runtime_error("refused by the hook"); }
  };
  caller.exec("BEGIN");
  caller.exec("INSERT INTO " + orders + " VALUES (1)");
  PQsetnonblocking(caller.native(), 1);
  auto publish = async_publish::many(caller.native(), area.where(), {job(1), job(2)},
                                     {key("k1"), key("k2")}, {std::make_shared<refuse>()});
  while (!publish.poll()) {
    pollfd pfd{publish.socket(), static_cast<short>(POLLIN | (publish.wants_write() ? POLLOUT : 0)),
               0};
    ::poll(&pfd, 1, 1000);
  }
  std::string got = "no failure";
  try {
    publish.result();
  } catch (const std::exception& e) {
    got = e.what();
  }
  CAF_CHECK_EQUAL(got, "refused by the hook");
  PQsetnonblocking(caller.native(), 0);
  // The transaction stays usable: the same keys publish within it, without the hook.
  auto again = enqueue_many_in_transaction(caller.native(), area.where(), {job(3), job(4)},
                                           {key("k1"), key("k2")});
  caller.exec("COMMIT");
  CAF_CHECK_EQUAL(area.scalar("SELECT count(*) FROM " + orders), 1);
  CAF_CHECK_EQUAL(rows(), 2);
  CAF_CHECK_EQUAL(keys(), 2);
  CAF_CHECK_EQUAL(rows(fmt::format("message_id IN ('{}', '{}')", again[0].id, again[1].id)), 2);
}

CAF_TEST(the asynchronous publish refuses blocking and idle connections before any SQL) {
  caf::scoped_actor self{*sys};
  auto ask = [&](pg_conn* conn) {
    std::string got = "accepted";
    self
      ->request(*publisher, 10s, enqueue_atom_v, caller_connection{conn}, job(1), enqueue_options{})
      .receive([&](const message&) {}, [&](caf::error& e) { got = describe(e); });
    return got;
  };
  caller.exec("BEGIN");
  CAF_CHECK(has(ask(caller.native()), "invalid_argument"));
  CAF_CHECK(has(ask(caller.native()), "non-blocking mode"));
  caller.exec("ROLLBACK");
  PQsetnonblocking(caller.native(), 1);
  CAF_CHECK(has(ask(caller.native()), "not_in_transaction"));
  PQsetnonblocking(caller.native(), 0);
  CAF_CHECK_EQUAL(rows(), 0);
}

CAF_TEST_FIXTURE_SCOPE_END()
