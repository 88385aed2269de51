#define CAF_SUITE execute
#include <caf/test/unit_test.hpp>

#include "actors/execute.hpp"

#include <stdexcept>

using namespace troupe;
using troupe::actors::execute;
using troupe::storage::outcome_state;

namespace {

struct fixture {
  task_registry tasks;
  fixture() {
    tasks.define(task_ref<int(int, int)>{"add"}, [](int a, int b) { return a + b; });
    tasks.define(task_ref<void(std::string)>{"explode"},
                 [](const std::string& why) { throw std::invalid_argument(why); });
    tasks.define(task_ref<int()>{"throw_int"}, []() -> int { throw 42; });
    tasks.define(task_ref<std::int32_t()>{"attempt"},
                 [](task_context& ctx) { return ctx.attempt; });
    tasks.define(task_ref<std::string()>{"binary"}, [] { return std::string("a\0b\xff", 4); });
  }

  storage::claimed_message msg(std::string task, std::string args, std::int32_t attempt = 1) {
    return storage::claimed_message{"0190f1e2-aaaa-7bbb-8ccc-0123456789ab",
                                    std::move(task),
                                    std::move(args),
                                    "{}",
                                    attempt,
                                    0,
                                    0};
  }
};

bool contains(const std::string& hay, const std::string& needle) {
  return hay.find(needle) != std::string::npos;
}

} // namespace

CAF_TEST_FIXTURE_SCOPE(execute_tests, fixture)

CAF_TEST(a task result is stored as JSON) {
  auto o = execute(tasks, msg("add", "[2, 3]"), "default");
  CAF_CHECK(o.state == outcome_state::done);
  CAF_CHECK_EQUAL(o.result_json, "5");
  CAF_CHECK(o.error_json.empty());
  CAF_CHECK_EQUAL(o.attempt, 1);
}

CAF_TEST(the task context carries the attempt) {
  auto o = execute(tasks, msg("attempt", "[]", 3), "default");
  CAF_CHECK_EQUAL(o.result_json, "3");
}

CAF_TEST(an unknown task is rejected with a recorded reason) {
  auto o = execute(tasks, msg("no_such_task", "[]"), "default");
  CAF_CHECK(o.state == outcome_state::failed);
  CAF_CHECK(contains(o.error_json, R"("type":"troupe::unknown_task")"));
  CAF_CHECK(contains(o.error_json, "no task named \\\"no_such_task\\\""));
}

CAF_TEST(undecodable arguments are rejected with a recorded reason) {
  for (const char* args : {R"(["two", 3])", "[1]", "{}"}) {
    auto o = execute(tasks, msg("add", args), "default");
    CAF_CHECK(o.state == outcome_state::failed);
    CAF_CHECK(contains(o.error_json, R"("type":"troupe::decode_failed")"));
  }
}

CAF_TEST(an exception from task code becomes a failure record) {
  auto o = execute(tasks, msg("explode", R"(["boom"])", 2), "default");
  CAF_CHECK(o.state == outcome_state::failed);
  CAF_CHECK(contains(o.error_json, R"("type":"std::invalid_argument")"));
  CAF_CHECK(contains(o.error_json, R"("text":"boom")"));
  CAF_CHECK(contains(o.error_json, R"("attempt":2)"));
  CAF_CHECK(contains(o.error_json, R"("time":")"));
  auto odd = execute(tasks, msg("throw_int", "[]"), "default");
  CAF_CHECK(odd.state == outcome_state::failed);
  CAF_CHECK(contains(odd.error_json, R"("type":"int")"));
}

CAF_TEST(a result PostgreSQL cannot store becomes a failure record) {
  auto o = execute(tasks, msg("binary", "[]"), "default");
  CAF_CHECK(o.state == outcome_state::failed);
  CAF_CHECK(contains(o.error_json, R"("type":"troupe::result_not_storable")"));
  CAF_CHECK(is_storable_json_text(o.error_json));
}

CAF_TEST(failure text that is not valid UTF - 8 is still storable) {
  auto o = execute(tasks, msg("explode", "[\"bad \xff byte\"]"), "default");
  CAF_CHECK(o.state == outcome_state::failed);
  CAF_CHECK(is_storable_json_text(o.error_json));
  CAF_CHECK(contains(o.error_json, "bad \\ufffd byte"));
}

CAF_TEST(failure text is cut to 2000 characters) {
  auto o = execute(tasks, msg("explode", "[\"" + std::string(5000, 'x') + "\"]"), "default");
  CAF_CHECK(contains(o.error_json, std::string(2000, 'x') + "\""));
  CAF_CHECK(!contains(o.error_json, std::string(2001, 'x')));
}

CAF_TEST_FIXTURE_SCOPE_END()
