// Pipelines run by a worker node: each step's result goes to the next step, which is published
// with its predecessor's completion; a failed step publishes nothing after it.
#define CAF_SUITE pipelines
#include <caf/test/unit_test.hpp>

#include "node_harness.hpp"
#include "troupe/composition.hpp"

#include <fmt/format.h>

#include <stdexcept>

using namespace troupe;
using namespace std::chrono_literals;

namespace {

task_ref<int(int, int)> add{"add"};
task_ref<int(int)> twice{"twice"};
task_ref<int(int)> broken{"broken"};
task_ref<int()> seven{"seven"};

struct fixture : testkit::node_harness {
  fixture() {
    task_options keep;
    keep.store_results = true;
    tasks->define(
      add, [](int a, int b) { return a + b; }, keep);
    tasks->define(
      twice, [](int x) { return 2 * x; }, keep);
    task_options once = keep;
    once.max_retries = 0;
    tasks->define(
      broken, [](int) -> int { throw std::domain_error("no"); }, once);
    tasks->define(
      seven, [] { return 7; }, keep);
  }
};

// A step whose arguments its predecessor's result completes.
message link(const char* task) {
  return make_message("default", task, "[]");
}

} // namespace

CAF_TEST_FIXTURE_SCOPE(pipelines_tests, fixture)

CAF_TEST(each step receives its predecessor result and runs once) {
  start_node();
  pipeline p({add(1, 2), link("twice"), link("twice")});
  auto published = p.run(producer);
  CAF_REQUIRE_EQUAL(published.size(), 1u);
  CAF_CHECK_EQUAL(published.front().id, p.id());
  CAF_CHECK_EQUAL(producer.get_result<int>(p.last(), true, 20s), 12);
  CAF_CHECK_EQUAL(p.get_results_json(producer), (std::vector<std::string>{"3", "6", "12"}));
  CAF_CHECK_EQUAL(p.completed_count(producer), 3u);
  // One row per step, each done once, each with the pipeline's id.
  CAF_CHECK_EQUAL(count(fmt::format("state = 'done' AND attempts = 1 AND "
                                    "options->>'composition_id' = '{}'",
                                    p.id())),
                  3);
  CAF_CHECK_EQUAL(count("true"), 3);
}

CAF_TEST(a typed pipeline runs like one built from messages) {
  start_node();
  pipeline p(start(add, 1, 2), then(twice), then_ignore(seven), then(twice));
  p.run(producer);
  CAF_CHECK_EQUAL(producer.get_result<int>(p.last(), true, 20s), 14);
  CAF_CHECK_EQUAL(p.get_results_json(producer), (std::vector<std::string>{"3", "6", "7", "14"}));
}

CAF_TEST(a pipeline run in a rolled back transaction leaves nothing) {
  pipeline gone({add(1, 2), link("twice")});
  pipeline kept({add(2, 3), link("twice")});
  auto tx = storage::connection::open(area.dsn(), "caller");
  tx.exec("BEGIN");
  gone.run_in_transaction(tx.native(), area.where());
  tx.exec("ROLLBACK");
  tx.exec("BEGIN");
  kept.run_in_transaction(tx.native(), area.where());
  tx.exec("COMMIT");
  start_node();
  CAF_CHECK_EQUAL(producer.get_result<int>(kept.last(), true, 20s), 10);
  CAF_CHECK_EQUAL(count("true"), 2);
  CAF_CHECK_EQUAL(count(fmt::format("options->>'composition_id' = '{}'", gone.id())), 0);
}

CAF_TEST(a failed step publishes nothing after it) {
  start_node();
  pipeline p({add(1, 1), link("broken"), link("twice")});
  p.run(producer);
  CAF_CHECK(testkit::wait_until([&] { return count("state = 'failed'") == 1; }, 20s));
  CAF_CHECK_EQUAL(count("true"), 2); // the third step was never published
  CAF_CHECK_EQUAL(p.completed_count(producer), 1u);
}

CAF_TEST(a step that ignores its predecessor takes only its own arguments) {
  start_node();
  pipeline p({add(2, 2), pipe_ignore(seven()), link("twice")});
  p.run(producer);
  CAF_CHECK_EQUAL(producer.get_result<int>(p.last(), true, 20s), 14);
}

CAF_TEST(a malformed next step publishes nothing and the step stays done) {
  start_node();
  auto m = seven();
  m.options_json = R"({"pipe_target":{"queue":"default","args":[]}})"; // no id, no task
  producer.enqueue(m);
  CAF_CHECK_EQUAL(producer.get_result<int>(m, true, 20s), 7);
  CAF_CHECK_EQUAL(count("true"), 1);
}

CAF_TEST(a pipeline is refused when it is empty too long or repeats a message) {
  auto refusal = [](std::vector<troupe::step> steps) {
    try {
      pipeline p(std::move(steps));
    } catch (const error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  CAF_CHECK_EQUAL(refusal({}), "a pipeline needs at least one step");
  CAF_CHECK_EQUAL(refusal(std::vector<troupe::step>(101, seven())),
                  "a pipeline has at most 100 steps, got 101");
  auto m = seven();
  CAF_CHECK_EQUAL(refusal({m, m}), "message " + m.id + " is used more than once in the pipeline");
}

CAF_TEST_FIXTURE_SCOPE_END()
