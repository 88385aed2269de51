// Deduplicated publishing: keys, duplicates in batches, concurrency, expiry, transactions.
#define CAF_SUITE deduplication
#include <caf/test/unit_test.hpp>

#include "publishing_fixture.hpp"
#include "troupe/transactional.hpp"

#include <libpq-fe.h>

#include <set>
#include <thread>

using namespace troupe;
using testkit::has;
using testkit::job;
using namespace std::chrono_literals;

namespace {

using fixture = testkit::publishing_fixture;

} // namespace

CAF_TEST_FIXTURE_SCOPE(deduplication_tests, fixture)

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

CAF_TEST_FIXTURE_SCOPE_END()
