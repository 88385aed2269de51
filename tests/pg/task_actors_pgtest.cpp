#define CAF_SUITE task_actors
#include <caf/test/unit_test.hpp>

#include "node_harness.hpp"
#include "troupe/admin.hpp"

#include <fmt/format.h>

#include <atomic>
#include <mutex>

using namespace troupe;
using namespace std::chrono_literals;

namespace {

task_ref<int(int, int)> add{"actor.add"};
task_ref<std::string(std::string)> echo{"actor.echo"};
task_ref<void(int)> hold{"actor.hold"};
task_ref<int(std::string)> refuse{"actor.refuse"};
task_ref<void()> vanish{"actor.vanish"};

using add_actor = task_actor<int(int, int)>;
using echo_actor = task_actor<std::string(std::string)>;
using hold_actor = task_actor<void(int)>;
using refuse_actor = task_actor<int(std::string)>;
using vanish_actor = task_actor<void()>;

// What the actors saw, read by the test's thread.
struct seen_by_actors {
  std::mutex mutex;
  std::vector<task_call> calls;
  std::vector<task_stop> stops;

  std::size_t stop_count() {
    std::lock_guard guard{mutex};
    return stops.size();
  }
};
using seen_ptr = std::shared_ptr<seen_by_actors>;

add_actor::behavior_type adder(add_actor::pointer, seen_ptr seen) {
  return {
    [=](const task_call& call, int a, int b) -> int {
      std::lock_guard guard{seen->mutex};
      seen->calls.push_back(call);
      return a + b;
    },
    [](stop_atom, const task_stop&) {},
  };
}

// Answers the call "first" only once "second" has arrived, through a response promise: the
// actor goes on taking messages while an attempt waits for its answer.
struct echo_state {
  std::optional<caf::typed_response_promise<std::string>> first;
};

echo_actor::behavior_type echoer(echo_actor::stateful_pointer<echo_state> self, seen_ptr seen) {
  return {
    [=](const task_call& call, const std::string& text) -> caf::result<std::string> {
      {
        std::lock_guard guard{seen->mutex};
        seen->calls.push_back(call);
      }
      if (text == "first") {
        self->state.first = self->make_response_promise<std::string>();
        return *self->state.first;
      }
      if (self->state.first) {
        self->state.first->deliver(std::string("first, after second"));
        self->state.first.reset();
      }
      return text;
    },
    [](stop_atom, const task_stop&) {},
  };
}

// Holds every attempt until it is told to stop, then answers with an error.
struct hold_state {
  seen_ptr seen;
  // By message id and attempt: a retry may come while an earlier attempt is held.
  std::map<std::pair<std::string, std::int32_t>, caf::typed_response_promise<void>> held;
};

hold_actor::behavior_type holder(hold_actor::stateful_pointer<hold_state> self, seen_ptr seen) {
  self->state.seen = std::move(seen);
  return {
    [=](const task_call& call, int) -> caf::result<void> {
      {
        std::lock_guard guard{self->state.seen->mutex};
        self->state.seen->calls.push_back(call);
      }
      auto rp = self->make_response_promise<void>();
      self->state.held.emplace(std::make_pair(call.message_id, call.attempt), rp);
      return rp;
    },
    [=](stop_atom, const task_stop& stop) {
      {
        std::lock_guard guard{self->state.seen->mutex};
        self->state.seen->stops.push_back(stop);
      }
      auto i = self->state.held.find(std::make_pair(stop.message_id, stop.attempt));
      if (i == self->state.held.end())
        return;
      i->second.deliver(caf::make_error(caf::sec::runtime_error, "stopped: " + stop.reason));
      self->state.held.erase(i);
    },
  };
}

// Every actor function takes an argument: CAF 0.17 trips UBSan spawning one without.
refuse_actor::behavior_type refuser(refuse_actor::pointer, seen_ptr) {
  return {
    [](const task_call&, const std::string& how) -> caf::result<int> {
      if (how == "troupe")
        return make_caf_error(errc::decode_failed, "the order number is not one of ours");
      return caf::make_error(caf::sec::runtime_error, "the warehouse said no");
    },
    [](stop_atom, const task_stop&) {},
  };
}

vanish_actor::behavior_type vanisher(vanish_actor::pointer self, seen_ptr) {
  return {
    [=](const task_call&) -> caf::result<void> {
      // Takes the attempt's promise and ends without delivering it.
      auto rp = self->make_response_promise<void>();
      self->quit(caf::exit_reason::user_shutdown);
      return rp;
    },
    [](stop_atom, const task_stop&) {},
  };
}

struct fixture : testkit::node_harness {
  seen_ptr seen = std::make_shared<seen_by_actors>();
  std::vector<caf::actor> actors;

  template <class Handle>
  Handle keep(Handle h) {
    actors.push_back(caf::actor_cast<caf::actor>(h));
    return h;
  }

  fixture() {
    task_options once;
    once.max_retries = 0;
    task_options kept = once;
    kept.store_results = true;
    define_task_actor(*tasks, add, keep(sys.spawn(adder, seen)), kept);
    define_task_actor(*tasks, echo, keep(sys.spawn(echoer, seen)), kept);
    task_options limited = once;
    limited.time_limit = 300ms;
    define_task_actor(*tasks, hold, keep(sys.spawn(holder, seen)), limited);
    define_task_actor(*tasks, refuse, keep(sys.spawn(refuser, seen)), once);
    define_task_actor(*tasks, vanish, keep(sys.spawn(vanisher, seen)), once);
  }

  ~fixture() {
    if (node)
      stop();
    for (auto& a : actors)
      caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
    tasks.reset();
  }

  node_options concurrent(int n) {
    queue_options q;
    q.concurrency = n;
    return options(q);
  }

  std::string error_type(const std::string& id) {
    auto conn = storage::connection::open(area.dsn(), "test");
    auto res = conn.exec(fmt::format("SELECT error->>'type' || ': ' || (error->>'text') FROM {} "
                                     "WHERE message_id = '{}'",
                                     area.queue_table(), id));
    return res.rows() == 1 && !res.is_null(0, 0) ? std::string(res.text(0, 0)) : std::string{};
  }

  bool wait_state(const std::string& id, const std::string& state) {
    return testkit::wait_until(
      [&] { return count(fmt::format("message_id = '{}' AND state = '{}'", id, state)) == 1; },
      15s);
  }
};

} // namespace

CAF_TEST_FIXTURE_SCOPE(task_actors_tests, fixture)

CAF_TEST(a typed actor implements a task and its reply is the result) {
  start_node();
  auto m = producer.enqueue(add(2, 3));
  CAF_CHECK_EQUAL(producer.get_result<int>(m, true, 15s), 5);
  std::lock_guard guard{seen->mutex};
  CAF_REQUIRE_EQUAL(seen->calls.size(), 1u);
  CAF_CHECK_EQUAL(seen->calls[0].message_id, m.id);
  CAF_CHECK_EQUAL(seen->calls[0].task, "actor.add");
  CAF_CHECK_EQUAL(seen->calls[0].queue, "default");
  CAF_CHECK_EQUAL(seen->calls[0].attempt, 1);
  // The default time limit of 10 minutes, less what the call took to arrive.
  CAF_CHECK(seen->calls[0].time_left_ms > 590'000 && seen->calls[0].time_left_ms <= 600'000);
}

CAF_TEST(a task actor answers later through a response promise and takes calls meanwhile) {
  start_node(concurrent(2));
  auto first = producer.enqueue(echo("first"));
  CAF_REQUIRE(testkit::wait_until(
    [&] {
      std::lock_guard guard{seen->mutex};
      return seen->calls.size() == 1;
    },
    15s));
  // The first attempt waits for its answer; the actor is free, and the second one answers it.
  auto second = producer.enqueue(echo("second"));
  CAF_CHECK_EQUAL(producer.get_result<std::string>(second, true, 15s), "second");
  CAF_CHECK_EQUAL(producer.get_result<std::string>(first, true, 15s), "first, after second");
}

CAF_TEST(the time limit reaches a task actor as a stop and fails the attempt) {
  start_node();
  auto m = producer.enqueue(hold(1));
  CAF_REQUIRE(wait_state(m.id, "failed"));
  CAF_CHECK_EQUAL(error_type(m.id), "troupe::time_limit_exceeded: the task actor stopped at its "
                                    "time limit: system_error(runtime_error, (\"stopped: "
                                    "time_limit\"))");
  std::lock_guard guard{seen->mutex};
  CAF_REQUIRE_EQUAL(seen->stops.size(), 1u);
  CAF_CHECK_EQUAL(seen->stops[0].message_id, m.id);
  CAF_CHECK_EQUAL(seen->stops[0].attempt, 1);
  CAF_CHECK_EQUAL(seen->stops[0].reason, "time_limit");
}

CAF_TEST(a cancel reaches a task actor as a stop and the message ends cancelled) {
  start_node();
  // A failure after a cancel is not retried: the message is cancelled instead.
  auto m = producer.enqueue(hold(1).with_time_limit(60s).with_max_retries(3));
  CAF_REQUIRE(wait_state(m.id, "running"));
  admin ops{admin_options{area.dsn(), area.where()}};
  ops.cancel(m.id);
  CAF_REQUIRE(wait_state(m.id, "cancelled"));
  CAF_REQUIRE_EQUAL(seen->stop_count(), 1u);
  std::lock_guard guard{seen->mutex};
  CAF_CHECK_EQUAL(seen->stops[0].reason, "cancelled");
  CAF_CHECK(error_type(m.id).rfind("troupe::cancellation_requested: ", 0) == 0);
}

CAF_TEST(a shutdown reaches a task actor that asked to be told) {
  start_node();
  auto m = producer.enqueue(hold(1).with_time_limit(60s).with_notify_shutdown());
  CAF_REQUIRE(wait_state(m.id, "running"));
  stop();
  CAF_CHECK_EQUAL(seen->stop_count(), 1u);
  std::lock_guard guard{seen->mutex};
  CAF_REQUIRE_EQUAL(seen->stops.size(), 1u);
  CAF_CHECK_EQUAL(seen->stops[0].reason, "shutdown");
  CAF_CHECK(error_type(m.id).rfind("troupe::shutdown_requested: ", 0) == 0);
}

CAF_TEST(an error answer fails the attempt with a record that names it) {
  start_node();
  auto plain = producer.enqueue(refuse("plain"));
  auto troupe_error = producer.enqueue(refuse("troupe"));
  CAF_REQUIRE(wait_state(plain.id, "failed"));
  CAF_REQUIRE(wait_state(troupe_error.id, "failed"));
  CAF_CHECK_EQUAL(error_type(plain.id),
                  "troupe::task_actor_error: the task actor answered with an error: "
                  "system_error(runtime_error, (\"the warehouse said no\"))");
  CAF_CHECK_EQUAL(error_type(troupe_error.id),
                  "troupe::decode_failed: the order number is not one of ours");
}

CAF_TEST(a task actor that ends before it answers fails the attempt) {
  start_node();
  auto m = producer.enqueue(vanish());
  wait_state(m.id, "failed");
  CAF_REQUIRE_EQUAL(area.scalar(fmt::format("SELECT count(*) FROM {} WHERE message_id = '{}' AND "
                                            "state = 'failed'",
                                            area.queue_table(), m.id)),
                    1);
  auto record = error_type(m.id);
  CAF_CHECK(record.rfind("troupe::task_actor_error: the task actor ended before it answered", 0) ==
            0);
  // The node goes on with the other tasks.
  auto next = producer.enqueue(add(1, 1));
  CAF_CHECK_EQUAL(producer.get_result<int>(next, true, 15s), 2);
}

CAF_TEST(define_task_actor refuses an invalid handle) {
  task_registry registry;
  add_actor none;
  bool refused = false;
  try {
    define_task_actor(registry, add, none);
  } catch (const error& e) {
    refused = e.code() == errc::invalid_argument &&
              std::string(e.what()) == "task actor.add: the task actor handle is invalid";
  }
  CAF_CHECK(refused);
}

// The enqueue hooks of a storage pool: before_enqueue may change a message or refuse the
// batch, after_enqueue sees what was written.
struct stamping_middleware : middleware {
  std::atomic<int> after{0};
  std::string name() const override { return "stamping"; }
  void before_enqueue(message& m) override {
    if (m.task == "actor.refuse")
      throw std::runtime_error("refuse is not published from here");
    m = m.with_priority(7);
  }
  void after_enqueue(const message&) override { ++after; }
};

CAF_TEST(a storage pool runs the enqueue hooks it was given) {
  auto hooks = std::make_shared<stamping_middleware>();
  auto pool = spawn_storage_pool(sys, area.dsn(), area.where(), 1, {hooks});
  caf::scoped_actor self{sys};
  std::vector<message> out;
  self
    ->request(pool, 10s, enqueue_atom_v, std::vector<message>{add(1, 2), add(3, 4)},
              std::vector<enqueue_options>{})
    .receive([&](std::vector<message>& published) { out = std::move(published); },
             [&](caf::error& e) { CAF_FAIL(describe(e)); });
  CAF_REQUIRE_EQUAL(out.size(), 2u);
  CAF_CHECK_EQUAL(out[0].priority, 7);
  CAF_CHECK_EQUAL(count("priority = 7"), 2);
  CAF_CHECK_EQUAL(hooks->after.load(), 2);
  // A hook that throws refuses the whole batch, by its text, and writes nothing.
  std::string refusal;
  self
    ->request(pool, 10s, enqueue_atom_v, std::vector<message>{add(5, 6), refuse("x")},
              std::vector<enqueue_options>{})
    .receive([&](std::vector<message>&) {}, [&](caf::error& e) { refusal = describe(e); });
  CAF_CHECK_EQUAL(refusal, "invalid_argument: a before_enqueue hook refused the batch: refuse is "
                           "not published from here");
  CAF_CHECK_EQUAL(count("true"), 2);
  CAF_CHECK_EQUAL(hooks->after.load(), 2);
  // With a deduplication key the hooks run after the key is claimed; a refusal leaves it free.
  enqueue_options keyed;
  keyed.deduplication_key = "order-9";
  keyed.deduplication_ttl = 60s;
  refusal.clear();
  self
    ->request(pool, 10s, enqueue_atom_v, std::vector<message>{refuse("y")},
              std::vector<enqueue_options>{keyed})
    .receive([&](std::vector<message>&) {}, [&](caf::error& e) { refusal = describe(e); });
  CAF_CHECK_EQUAL(refusal, "invalid_argument: a before_enqueue hook refused the batch: refuse is "
                           "not published from here");
  self
    ->request(pool, 10s, enqueue_atom_v, std::vector<message>{add(7, 8)},
              std::vector<enqueue_options>{keyed})
    .receive([&](std::vector<message>& published) { CAF_CHECK_EQUAL(published.size(), 1u); },
             [&](caf::error& e) { CAF_FAIL(describe(e)); });
  CAF_CHECK_EQUAL(count("true"), 3);
  self->send_exit(pool, caf::exit_reason::user_shutdown);
}

CAF_TEST_FIXTURE_SCOPE_END()
