#define CAF_SUITE async_publishing
#include <caf/test/unit_test.hpp>

#include "publishing_fixture.hpp"
#include "troupe/async_transactional.hpp"
#include "troupe/caf.hpp"
#include "troupe/transactional.hpp"

#include <libpq-fe.h>
#include <poll.h>

#include <optional>

using namespace troupe;
using testkit::has;
using testkit::job;
using namespace std::chrono_literals;

namespace {

using fixture = testkit::publishing_fixture;

} // namespace

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
