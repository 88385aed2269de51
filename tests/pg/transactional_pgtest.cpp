#define CAF_SUITE transactional
#include <caf/test/unit_test.hpp>

#include "scratch_area.hpp"
#include "troupe/async_transactional.hpp"
#include "troupe/error.hpp"
#include "troupe/task.hpp"
#include "troupe/transactional.hpp"

#include <fmt/format.h>
#include <functional>
#include <libpq-fe.h>
#include <poll.h>

using namespace troupe;
using namespace std::chrono_literals;

namespace {

task_ref<void(int)> ship{"ship"};

struct fixture {
  testkit::scratch_area area;
  storage::connection caller = storage::connection::open(area.dsn(), "caller");
  storage::connection listener = storage::connection::open(area.dsn(), "listener");

  fixture() {
    area.sql().exec(fmt::format("CREATE TABLE {}.orders (id int PRIMARY KEY)",
                                storage::quote_identifier(area.where().schema)));
    listener.exec("LISTEN " + storage::quote_identifier(storage::wake_channel(area.where())));
  }

  std::int64_t count(const std::string& where) {
    return area.scalar(fmt::format("SELECT count(*) FROM {} WHERE {}", area.queue_table(), where));
  }
  // Milliseconds from the caller's transaction start to the eta of message `id`, and from the
  // server's clock now to that eta (both by the server's clock).
  std::pair<std::int64_t, std::int64_t> eta_of(const std::string& id,
                                               const std::string& transaction_start) {
    auto since_start = area.scalar(
      fmt::format("SELECT (extract(epoch FROM eta - '{}'::timestamptz) * 1000)::bigint FROM {} "
                  "WHERE message_id = '{}'",
                  transaction_start, area.queue_table(), id));
    auto from_now = area.scalar(
      fmt::format("SELECT (extract(epoch FROM eta - clock_timestamp()) * 1000)::bigint FROM {} "
                  "WHERE message_id = '{}'",
                  area.queue_table(), id));
    return {since_start, from_now};
  }

  std::int64_t orders() {
    return area.scalar(fmt::format("SELECT count(*) FROM {}.orders",
                                   storage::quote_identifier(area.where().schema)));
  }
  void insert_order(int id) {
    caller.exec(fmt::format("INSERT INTO {}.orders VALUES ({})",
                            storage::quote_identifier(area.where().schema), id));
  }
  // Notifications the listener got (waits a little for them to arrive).
  int notifications() {
    int n = 0;
    testkit::wait_until(
      [&] {
        listener.exec("SELECT 1");
        while (PGnotify* x = PQnotifies(listener.native())) {
          ++n;
          PQfreemem(x);
        }
        return n > 0;
      },
      300ms);
    return n;
  }
};

} // namespace

CAF_TEST_FIXTURE_SCOPE(transactional_tests, fixture)

CAF_TEST(a commit makes the message and its notification visible) {
  caller.exec("BEGIN");
  insert_order(1);
  auto m = enqueue_in_transaction(caller.native(), area.where(), ship(1));
  CAF_CHECK_EQUAL(count("true"), 0); // not visible before the commit
  caller.exec("COMMIT");
  CAF_CHECK_EQUAL(count(fmt::format("message_id = '{}'", m.id)), 1);
  CAF_CHECK_EQUAL(orders(), 1);
  CAF_CHECK_EQUAL(notifications(), 1);
}

CAF_TEST(a rollback removes the message and its notification) {
  caller.exec("BEGIN");
  insert_order(2);
  enqueue_in_transaction(caller.native(), area.where(), ship(2));
  caller.exec("ROLLBACK");
  CAF_CHECK_EQUAL(count("true"), 0);
  CAF_CHECK_EQUAL(orders(), 0);
  CAF_CHECK_EQUAL(notifications(), 0);
}

CAF_TEST(a connection outside a transaction is refused before any SQL) {
  try {
    enqueue_in_transaction(caller.native(), area.where(), ship(3));
    CAF_FAIL("published outside a transaction");
  } catch (const error& e) {
    CAF_CHECK(e.code() == errc::not_in_transaction);
  }
  CAF_CHECK_EQUAL(count("true"), 0);
  CAF_CHECK(PQtransactionStatus(caller.native()) == PQTRANS_IDLE); // nothing was begun
}

CAF_TEST(a failed batch rolls back to its savepoint and keeps the earlier writes of the caller) {
  caller.exec("BEGIN");
  insert_order(4);
  std::vector<message> batch{ship(1), ship(2)};
  batch[1].args_json = "{not json"; // the database refuses the whole statement
  try {
    enqueue_many_in_transaction(caller.native(), area.where(), batch);
    CAF_FAIL("published a batch the database refused");
  } catch (const error&) {
  }
  CAF_CHECK(PQtransactionStatus(caller.native()) == PQTRANS_INTRANS); // still usable
  auto good = enqueue_many_in_transaction(caller.native(), area.where(), {ship(5), ship(6)});
  caller.exec("COMMIT");
  CAF_CHECK_EQUAL(orders(), 1);
  CAF_CHECK_EQUAL(count("true"), 2);
  CAF_CHECK_EQUAL(good.size(), 2u);
}

CAF_TEST(a batch holds at most 1000 messages and an empty one runs no SQL) {
  caller.exec("BEGIN");
  std::vector<message> too_many(1001, ship(1));
  try {
    enqueue_many_in_transaction(caller.native(), area.where(), too_many);
    CAF_FAIL("accepted 1001 messages");
  } catch (const error& e) {
    CAF_CHECK(std::string(e.what()).find("batch limit is 1000 messages") != std::string::npos);
  }
  CAF_CHECK(enqueue_many_in_transaction(caller.native(), area.where(), {}).empty());
  std::vector<message> thousand;
  for (int i = 0; i < 1000; ++i)
    thousand.push_back(ship(i));
  auto out = enqueue_many_in_transaction(caller.native(), area.where(), thousand);
  caller.exec("COMMIT");
  CAF_CHECK_EQUAL(count("true"), 1000);
  CAF_CHECK_EQUAL(out.front().id, thousand.front().id); // input order kept
  CAF_CHECK_EQUAL(out.back().id, thousand.back().id);
}

CAF_TEST(a delay in the caller transaction counts from the publish in every mode) {
  // Each publish comes 1.5 s into its transaction, with a 1 s delay: its eta is about 2.5 s
  // after the transaction began, so still ahead when the transaction commits.
  auto in_transaction = [&](const std::function<std::vector<std::string>()>& publish) {
    caller.exec("BEGIN");
    std::string start(caller.exec("SELECT now()::text").text(0, 0));
    caller.exec("SELECT pg_sleep(1.5)");
    auto ids = publish();
    caller.exec("COMMIT");
    for (const auto& id : ids) {
      auto [since_start, from_now] = eta_of(id, start);
      CAF_CHECK(since_start >= 2400);
      CAF_CHECK(from_now > 500); // ahead of the commit, which came just after the publish
      CAF_CHECK(from_now <= 1000);
    }
  };
  in_transaction([&] {
    return std::vector<std::string>{
      enqueue_in_transaction(caller.native(), area.where(), ship(1).with_delay(1s)).id};
  });
  in_transaction([&] {
    auto out =
      enqueue_many_in_transaction(caller.native(), area.where(), {ship(2), ship(3)},
                                  {enqueue_options::delayed(1s), enqueue_options::delayed(1s)});
    return std::vector<std::string>{out[0].id, out[1].id};
  });
  in_transaction([&] { // the deduplicated path: a key claim first, then the insert
    auto o = enqueue_options::deduplicated("order-4", 60s);
    o.delay = 1s;
    return std::vector<std::string>{
      enqueue_in_transaction(caller.native(), area.where(), ship(4), o).id};
  });
  in_transaction([&] { // non-blocking, as an event loop drives it
    PQsetnonblocking(caller.native(), 1);
    auto publish =
      async_publish::many(caller.native(), area.where(), {ship(5)}, {enqueue_options::delayed(1s)});
    while (!publish.poll()) {
      pollfd pfd{publish.socket(),
                 static_cast<short>(POLLIN | (publish.wants_write() ? POLLOUT : 0)), 0};
      ::poll(&pfd, 1, 100);
    }
    auto out = publish.result();
    PQsetnonblocking(caller.native(), 0);
    return std::vector<std::string>{out[0].id};
  });
  CAF_CHECK_EQUAL(count("state = 'queued'"), 5);
}

CAF_TEST_FIXTURE_SCOPE_END()
