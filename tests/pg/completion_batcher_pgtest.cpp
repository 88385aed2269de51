#define CAF_SUITE completion_batcher
#include <caf/test/unit_test.hpp>

#include "actors/completion_batcher.hpp"
#include "actors/protocol.hpp"
#include "actors/storage_actor.hpp"
#include "scratch_area.hpp"
#include "storage/queries.hpp"
#include "troupe/client.hpp"
#include "troupe/task.hpp"

#include <fmt/format.h>

using namespace troupe;
using namespace troupe::actors;
using namespace std::chrono_literals;

namespace {

task_ref<void(int)> job{"job"};

struct fixture {
  testkit::scratch_area area;
  client producer{client_options{area.dsn(), area.where()}};
  caf::actor_system_config cfg;
  caf::actor_system sys{cfg};
  caf::scoped_actor self{sys};
  storage_actor storage;
  std::int32_t node_id = 0;
  batcher_actor batcher;

  fixture() {
    storage = actors::spawn_storage_router(
      sys, actors::storage_settings{area.dsn(), area.statements_ptr(), "test", 1000ms}, 2);
    node_id = storage::register_node(area.sql(), area.statements(), {"t", "h", 1, {"default"}});
    batcher = actors::spawn_completion_batcher(sys, {node_id, storage, 1ms, 100});
  }

  ~fixture() {
    self->send_exit(batcher, caf::exit_reason::user_shutdown);
    self->send_exit(storage, caf::exit_reason::user_shutdown);
  }

  std::vector<storage::claimed_message> claim(int n) {
    for (int i = 0; i < n; ++i)
      producer.enqueue(job(i));
    return storage::claim_batch(area.sql(), area.statements(), "default", node_id, n).messages;
  }

  void flush() {
    self->request(batcher, 10s, flush_atom_v)
      .receive([](std::int64_t) {}, [](caf::error& e) { CAF_FAIL(describe(e)); });
  }

  std::int64_t count(const std::string& where) {
    return area.scalar(fmt::format("SELECT count(*) FROM {} WHERE {}", area.queue_table(), where));
  }
};

storage::outcome done(const storage::claimed_message& m, std::string result = "1") {
  return storage::outcome{m.id, m.attempt, storage::outcome_state::done, std::move(result), "",
                          0,    {}};
}

} // namespace

CAF_TEST_FIXTURE_SCOPE(completion_batcher_tests, fixture)

CAF_TEST(outcomes are written and a flush answers once they are) {
  auto msgs = claim(50);
  for (auto& m : msgs)
    self->send(batcher, complete_atom_v, done(m));
  flush();
  CAF_CHECK_EQUAL(count("state = 'done'"), 50);
}

CAF_TEST(an outcome the database refuses does not hold back the others) {
  auto msgs = claim(5);
  for (std::size_t i = 0; i < msgs.size(); ++i)
    self->send(batcher, complete_atom_v, done(msgs[i], i == 2 ? "{not json" : "7"));
  flush();
  CAF_CHECK_EQUAL(count("state = 'done' AND result = '7'"), 4);
  CAF_CHECK_EQUAL(count(fmt::format("message_id = '{}' AND state = 'failed' AND "
                                    "error->>'type' = 'troupe::outcome_not_storable'",
                                    msgs[2].id)),
                  1);
  // And later outcomes go through in batches again.
  auto more = claim(3);
  for (auto& m : more)
    self->send(batcher, complete_atom_v, done(m));
  flush();
  CAF_CHECK_EQUAL(count("state = 'done'"), 7);
}

CAF_TEST(a stale outcome is refused and settled) {
  auto msgs = claim(1);
  auto stale = done(msgs[0]);
  stale.attempt += 1;
  self->send(batcher, complete_atom_v, stale);
  flush();
  CAF_CHECK_EQUAL(count("state = 'running'"), 1);
}

CAF_TEST_FIXTURE_SCOPE_END()
