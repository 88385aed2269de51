#define CAF_SUITE execute
#include <caf/test/unit_test.hpp>

#include "actors/execute.hpp"

#include <chrono>
#include <stdexcept>

using namespace troupe;
using namespace std::chrono_literals;
using troupe::actors::execute;
using troupe::storage::outcome_state;

namespace {

struct not_worth_retrying : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Records the order in which hooks ran.
struct recorder final : middleware {
  std::string tag;
  std::vector<std::string>* log;
  bool skip = false;
  recorder(std::string t, std::vector<std::string>* l, bool s = false)
      : tag(std::move(t)), log(l), skip(s) {}
  std::string name() const override { return tag; }
  void before_process(attempt&) override {
    log->push_back(tag + ".before");
    if (skip)
      throw skip_attempt{"test::skipped", "skipped by " + tag};
  }
  void after_process(attempt&) override { log->push_back(tag + ".after"); }
  void after_skip(attempt&) override { log->push_back(tag + ".after_skip"); }
};

struct fixture {
  task_registry tasks;
  fixture() {
    task_options keep;
    keep.store_results = true;
    tasks.define(
      task_ref<int(int, int)>{"add"}, [](int a, int b) { return a + b; }, keep);
    tasks.define(task_ref<int(int, int)>{"add_forget"}, [](int a, int b) { return a + b; });
    tasks.define(task_ref<void(std::string)>{"explode"},
                 [](const std::string& why) { throw std::invalid_argument(why); });
    tasks.define(task_ref<int()>{"throw_int"}, []() -> int { throw 42; });
    tasks.define(
      task_ref<std::int32_t()>{"attempt"}, [](task_context& ctx) { return ctx.attempt; }, keep);
    tasks.define(task_ref<std::string()>{"binary"}, [] { return std::string("a\0b\xff", 4); });
    task_options limited;
    limited.max_retries = 2;
    limited.min_backoff = 100ms;
    limited.max_backoff = 1s;
    limited.on_retry_exhausted = "gave_up";
    limited.on_failure = "failed_once";
    limited.on_success = "succeeded";
    limited.never_retry_on<not_worth_retrying>();
    tasks.define(
      task_ref<void(int)>{"flaky"},
      [](int mode) {
        if (mode == 1)
          throw std::runtime_error("try again");
        if (mode == 2)
          throw not_worth_retrying("no point");
      },
      limited);
    task_options picky;
    picky.retry_when = [](std::int32_t retries, const std::exception_ptr&) { return retries < 1; };
    tasks.define(
      task_ref<void()>{"picky"}, [] { throw std::runtime_error("x"); }, picky);
    task_options young;
    young.max_age = 1000ms;
    tasks.define(
      task_ref<void()>{"young"}, [] {}, young);
    tasks.define(task_ref<void(message_summary, retry_info)>{"gave_up", "handlers"},
                 [](const message_summary&, const retry_info&) {});
  }

  storage::claimed_message msg(std::string task, std::string args, std::int32_t attempt = 1,
                               std::string options = "{}", std::int64_t enqueued_at_ms = 0) {
    if (enqueued_at_ms == 0)
      enqueued_at_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                         std::chrono::system_clock::now().time_since_epoch())
                         .count();
    return storage::claimed_message{"0190f1e2-aaaa-7bbb-8ccc-0123456789ab",
                                    std::move(task),
                                    std::move(args),
                                    std::move(options),
                                    attempt,
                                    0,
                                    enqueued_at_ms};
  }
};

bool contains(const std::string& hay, const std::string& needle) {
  return hay.find(needle) != std::string::npos;
}

} // namespace

CAF_TEST_FIXTURE_SCOPE(execute_tests, fixture)

CAF_TEST(a result is kept only when the task stores results) {
  auto kept = execute(tasks, msg("add", "[2, 3]"), "default");
  CAF_CHECK(kept.state == outcome_state::done);
  CAF_CHECK_EQUAL(kept.result_json, "5");
  CAF_CHECK(kept.error_json.empty());
  auto forgotten = execute(tasks, msg("add_forget", "[2, 3]"), "default");
  CAF_CHECK(forgotten.state == outcome_state::done);
  CAF_CHECK(forgotten.result_json.empty());
  auto asked =
    execute(tasks, msg("add_forget", "[2, 3]", 1, R"({"store_results":true})"), "default");
  CAF_CHECK_EQUAL(asked.result_json, "5");
}

CAF_TEST(the task context carries the attempt) {
  auto o = execute(tasks, msg("attempt", "[]", 3), "default");
  CAF_CHECK_EQUAL(o.result_json, "3");
}

CAF_TEST(an unknown task is rejected with a recorded reason and never retried) {
  auto o = execute(tasks, msg("no_such_task", "[]"), "default");
  CAF_CHECK(o.state == outcome_state::failed);
  CAF_CHECK(contains(o.error_json, R"("type":"troupe::unknown_task")"));
  CAF_CHECK(contains(o.error_json, "no task named \\\"no_such_task\\\""));
}

CAF_TEST(undecodable arguments are rejected with a recorded reason and never retried) {
  for (const char* args : {R"(["two", 3])", "[1]", "{}"}) {
    auto o = execute(tasks, msg("add", args), "default");
    CAF_CHECK(o.state == outcome_state::failed);
    CAF_CHECK(contains(o.error_json, R"("type":"troupe::decode_failed")"));
  }
}

CAF_TEST(an exception from task code is retried after the default backoff with its record) {
  auto o = execute(tasks, msg("explode", R"(["boom"])", 2), "default");
  CAF_CHECK(o.state == outcome_state::retry);
  // Second attempt: one retry so far, so 15 s doubled once = 30 s, drawn from its upper half.
  CAF_CHECK(o.retry_delay_ms >= 15000 && o.retry_delay_ms <= 30000);
  CAF_CHECK(contains(o.error_json, R"("type":"std::invalid_argument")"));
  CAF_CHECK(contains(o.error_json, R"("text":"boom")"));
  CAF_CHECK(contains(o.error_json, R"("attempt":2)"));
  CAF_CHECK(contains(o.error_json, R"("time":")"));
  auto odd = execute(tasks, msg("throw_int", "[]"), "default");
  CAF_CHECK(odd.state == outcome_state::retry);
  CAF_CHECK(contains(odd.error_json, R"("type":"int")"));
}

CAF_TEST(retries stop at max_retries and the exhausted handler gets one message) {
  auto first = execute(tasks, msg("flaky", "[1]", 1), "default");
  CAF_CHECK(first.state == outcome_state::retry);
  CAF_CHECK(first.retry_delay_ms == 100); // the first retry waits exactly min_backoff
  auto third = execute(tasks, msg("flaky", "[1]", 3), "default");
  CAF_CHECK(third.state == outcome_state::failed);
  // on_failure on every failed attempt, on_retry_exhausted once, after the last one.
  CAF_REQUIRE_EQUAL(third.follow_ups.size(), 2u);
  auto& exhausted = third.follow_ups[1];
  CAF_CHECK_EQUAL(exhausted.task, "gave_up");
  CAF_CHECK_EQUAL(exhausted.queue, "handlers");
  CAF_CHECK(contains(exhausted.args_json, R"("retries": 2)"));
  CAF_CHECK(contains(exhausted.args_json, R"("max_retries": 2)"));
  CAF_CHECK(contains(exhausted.args_json, R"("text": "try again")"));
  CAF_CHECK(contains(exhausted.args_json, R"("task": "flaky")"));
  CAF_CHECK_EQUAL(first.follow_ups.size(), 1u); // only on_failure while retries remain
  CAF_CHECK_EQUAL(first.follow_ups[0].task, "failed_once");
}

CAF_TEST(a message option overrides the task option) {
  auto o = execute(tasks, msg("flaky", "[1]", 1, R"({"max_retries":0})"), "default");
  CAF_CHECK(o.state == outcome_state::failed);
}

CAF_TEST(exceptions marked never_retry are not retried) {
  auto o = execute(tasks, msg("flaky", "[2]", 1), "default");
  CAF_CHECK(o.state == outcome_state::failed);
  CAF_CHECK(contains(o.error_json, "not_worth_retrying"));
}

CAF_TEST(retry_when decides instead of max_retries) {
  CAF_CHECK(execute(tasks, msg("picky", "[]", 1), "default").state == outcome_state::retry);
  CAF_CHECK(execute(tasks, msg("picky", "[]", 2), "default").state == outcome_state::failed);
}

CAF_TEST(backoff stays within its bounds over many draws) {
  for (std::int32_t retries = 0; retries < 40; ++retries) {
    std::int64_t lo = 1 << 30, hi = 0;
    for (int i = 0; i < 500; ++i) {
      auto d = retry_backoff(retries, 15s, 7 * 24h).count();
      lo = std::min(lo, d);
      hi = std::max(hi, d);
    }
    auto base = std::min<std::int64_t>(15000LL << std::min(retries, 30), 7LL * 24 * 3600 * 1000);
    CAF_CHECK(lo >= 15000); // never below the minimum
    CAF_CHECK(hi <= base);  // never above the doubled, capped base
    CAF_CHECK(lo >= std::max<std::int64_t>(15000, base / 2));
    if (retries > 0 && base > 30000)
      CAF_CHECK(hi > lo); // jitter
  }
}

CAF_TEST(a message older than max_age is skipped without running) {
  auto old = execute(tasks, msg("young", "[]", 1, "{}", 1000), "default");
  CAF_CHECK(old.state == outcome_state::failed);
  CAF_CHECK(contains(old.error_json, R"("type":"troupe::age_limit_exceeded")"));
  CAF_CHECK(contains(old.error_json, R"("skipped":true)"));
  auto fresh = execute(tasks, msg("young", "[]"), "default");
  CAF_CHECK(fresh.state == outcome_state::done);
}

CAF_TEST(on_success follows a success with the result) {
  auto o = execute(tasks, msg("flaky", "[0]"), "default");
  CAF_CHECK(o.state == outcome_state::done);
  CAF_REQUIRE_EQUAL(o.follow_ups.size(), 1u);
  CAF_CHECK_EQUAL(o.follow_ups[0].task, "succeeded");
  CAF_CHECK(contains(o.follow_ups[0].args_json, R"("id": "0190f1e2-aaaa-7bbb-8ccc-0123456789ab")"));
  CAF_CHECK(contains(o.follow_ups[0].args_json, "\"null\"]")); // the result, as JSON text
}

CAF_TEST(middleware runs in order around the task and a skip unwinds) {
  std::vector<std::string> order;
  task_registry r;
  r.set_middleware(
    {std::make_shared<recorder>("a", &order), std::make_shared<recorder>("b", &order)});
  r.define(task_ref<void()>{"noop"}, [] {});
  execute(r, msg("noop", "[]"), "default");
  CAF_CHECK_EQUAL(order, (std::vector<std::string>{"a.before", "b.before", "b.after", "a.after"}));
  order.clear();
  task_registry s;
  s.set_middleware({std::make_shared<recorder>("a", &order),
                    std::make_shared<recorder>("b", &order, true),
                    std::make_shared<recorder>("c", &order)});
  s.define(task_ref<void()>{"noop"}, [] {});
  auto o = execute(s, msg("noop", "[]"), "default");
  CAF_CHECK_EQUAL(order, (std::vector<std::string>{"a.before", "b.before", "a.after_skip"}));
  CAF_CHECK(contains(o.error_json, R"("type":"test::skipped")"));
}

CAF_TEST(a result PostgreSQL cannot store becomes a failure record) {
  auto o = execute(tasks, msg("binary", "[]"), "default");
  CAF_CHECK(o.state == outcome_state::failed);
  CAF_CHECK(contains(o.error_json, R"("type":"troupe::result_not_storable")"));
  CAF_CHECK(is_storable_json_text(o.error_json));
}

CAF_TEST(failure text that is not valid UTF - 8 is still storable) {
  auto o = execute(tasks, msg("explode", "[\"bad \xff byte\"]"), "default");
  CAF_CHECK(is_storable_json_text(o.error_json));
  CAF_CHECK(contains(o.error_json, "bad \\ufffd byte"));
}

CAF_TEST(failure text is cut to 2000 characters) {
  auto o = execute(tasks, msg("explode", "[\"" + std::string(5000, 'x') + "\"]"), "default");
  CAF_CHECK(contains(o.error_json, std::string(2000, 'x') + "\""));
  CAF_CHECK(!contains(o.error_json, std::string(2001, 'x')));
}

CAF_TEST_FIXTURE_SCOPE_END()
