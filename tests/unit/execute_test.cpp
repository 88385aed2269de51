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
    // Asks to be retried after `ms` milliseconds, with the default reason when `why` is empty.
    auto ask_later = [](std::int64_t ms, const std::string& why) {
      if (why.empty())
        throw retry_after(std::chrono::milliseconds(ms));
      throw retry_after(std::chrono::milliseconds(ms), why);
    };
    tasks.define(task_ref<void(std::int64_t, std::string)>{"later"}, ask_later, limited);
    task_options stubborn = limited;
    stubborn.never_retry_on<std::runtime_error>();
    tasks.define(task_ref<void(std::int64_t, std::string)>{"later_never"}, ask_later, stubborn);
    tasks.define(task_ref<void(std::int64_t, std::string)>{"later_picky"}, ask_later, picky);
    tasks.define(task_ref<void(std::int64_t, std::string)>{"later_default"}, ask_later);
    tasks.define(
      task_ref<bool()>{"told"}, [](task_context& ctx) { return ctx.notify_shutdown; }, keep);
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
  // Second attempt: one retry so far, so a draw in [15 s * 2, 15 s * 4].
  CAF_CHECK(o.retry_delay_ms >= 30000 && o.retry_delay_ms <= 60000);
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
  // The first retry waits a draw in [min_backoff, 2 * min_backoff].
  CAF_CHECK(first.retry_delay_ms >= 100 && first.retry_delay_ms <= 200);
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

CAF_TEST(an attempt lost with its node counts against max_retries) {
  auto lost = [&](std::string task, std::string args, std::int32_t attempt) {
    auto m = msg(std::move(task), std::move(args), attempt);
    m.previous_lost = true;
    return m;
  };
  // flaky: max_retries 2. After attempt 2 was lost one retry is left: attempt 3 runs.
  auto third = execute(tasks, lost("flaky", "[0]", 3), "default");
  CAF_CHECK(third.state == outcome_state::done);
  // After attempt 3 was lost none is left: attempt 4 fails without running, for good, and the
  // exhausted handler follows.
  auto fourth = execute(tasks, lost("flaky", "[0]", 4), "default");
  CAF_CHECK(fourth.state == outcome_state::failed);
  CAF_CHECK(contains(fourth.error_json, R"("type":"troupe::poison_message")"));
  CAF_CHECK(contains(fourth.error_json, "attempt 3 was lost with its node"));
  CAF_REQUIRE_EQUAL(fourth.follow_ups.size(), 2u);
  CAF_CHECK_EQUAL(fourth.follow_ups[0].task, "failed_once");
  CAF_CHECK_EQUAL(fourth.follow_ups[1].task, "gave_up");
  CAF_CHECK(contains(fourth.follow_ups[1].args_json, R"("type": "troupe::poison_message")"));
  // The same attempt number without a lost attempt before it runs.
  CAF_CHECK(execute(tasks, msg("flaky", "[0]", 4), "default").state == outcome_state::done);
  // retry_when decides for the lost attempt too: picky retries once, so attempt 2 runs (and
  // fails for good by its own failure), and attempt 3 does not.
  auto second = execute(tasks, lost("picky", "[]", 2), "default");
  CAF_CHECK(second.state == outcome_state::failed);
  CAF_CHECK(contains(second.error_json, R"("type":"std::runtime_error")"));
  auto picked = execute(tasks, lost("picky", "[]", 3), "default");
  CAF_CHECK(contains(picked.error_json, "troupe::poison_message"));
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
  CAF_CHECK(contains(o.error_json, "bad \xef\xbf\xbd byte"));
}

CAF_TEST(failure text is cut to 2000 characters) {
  auto o = execute(tasks, msg("explode", "[\"" + std::string(5000, 'x') + "\"]"), "default");
  CAF_CHECK(contains(o.error_json, std::string(2000, 'x') + "\""));
  CAF_CHECK(!contains(o.error_json, std::string(2001, 'x')));
}

CAF_TEST(retry_after retries after exactly the delay the task asked for) {
  // 5 s, beyond the task's 1 s max_backoff: the requested delay is used as it is.
  auto o = execute(tasks, msg("later", R"([5000, "the shop is closed"])", 1), "default");
  CAF_CHECK(o.state == outcome_state::retry);
  CAF_CHECK_EQUAL(o.retry_delay_ms, 5000);
  CAF_CHECK(contains(o.error_json, R"("type":"troupe::retry_after")"));
  CAF_CHECK(contains(o.error_json, R"("text":"the shop is closed")"));
  // It is a failure: on_failure follows it, as for any failed attempt.
  CAF_REQUIRE_EQUAL(o.follow_ups.size(), 1u);
  CAF_CHECK_EQUAL(o.follow_ups[0].task, "failed_once");
  CAF_CHECK(contains(o.follow_ups[0].args_json, R"("type": "troupe::retry_after")"));
  // A later retry too: no backoff doubling.
  auto second = execute(tasks, msg("later", R"([5000, "again"])", 2), "default");
  CAF_CHECK_EQUAL(second.retry_delay_ms, 5000);
  auto plain = execute(tasks, msg("later", R"([250, ""])", 1), "default");
  CAF_CHECK_EQUAL(plain.retry_delay_ms, 250);
  CAF_CHECK(contains(plain.error_json, R"("text":"retry requested by the task")"));
}

CAF_TEST(a negative retry_after delay counts as zero) {
  CAF_CHECK_EQUAL(retry_after(std::chrono::milliseconds(-5)).delay().count(), 0);
  auto o = execute(tasks, msg("later", R"([-5000, "now"])", 1), "default");
  CAF_CHECK(o.state == outcome_state::retry);
  CAF_CHECK_EQUAL(o.retry_delay_ms, 0);
  auto zero = execute(tasks, msg("later", R"([0, "now"])", 1), "default");
  CAF_CHECK(zero.state == outcome_state::retry);
  CAF_CHECK_EQUAL(zero.retry_delay_ms, 0);
}

CAF_TEST(retry_after uses up retries and exhausts them like any failure) {
  // max_retries = 2: the third attempt is the last.
  auto last = execute(tasks, msg("later", R"([5000, "still closed"])", 3), "default");
  CAF_CHECK(last.state == outcome_state::failed);
  CAF_CHECK(contains(last.error_json, R"("type":"troupe::retry_after")"));
  CAF_REQUIRE_EQUAL(last.follow_ups.size(), 2u);
  CAF_CHECK_EQUAL(last.follow_ups[1].task, "gave_up");
  CAF_CHECK(contains(last.follow_ups[1].args_json, R"("retries": 2)"));
  CAF_CHECK(contains(last.follow_ups[1].args_json, R"("type": "troupe::retry_after")"));
  // A message's own max_retries applies too.
  auto none = execute(tasks, msg("later", R"([5000, ""])", 1, R"({"max_retries":0})"), "default");
  CAF_CHECK(none.state == outcome_state::failed);
  // With the default policy (20 retries), the 21st attempt is the last.
  CAF_CHECK(execute(tasks, msg("later_default", R"([10, ""])", 20), "default").state ==
            outcome_state::retry);
  CAF_CHECK(execute(tasks, msg("later_default", R"([10, ""])", 21), "default").state ==
            outcome_state::failed);
}

CAF_TEST(never_retry and retry_when apply to retry_after first) {
  auto never = execute(tasks, msg("later_never", R"([5000, ""])", 1), "default");
  CAF_CHECK(never.state == outcome_state::failed);
  CAF_CHECK(contains(never.error_json, R"("type":"troupe::retry_after")"));
  // never_retry_on: no exhausted handler, only on_failure.
  CAF_REQUIRE_EQUAL(never.follow_ups.size(), 1u);
  CAF_CHECK_EQUAL(never.follow_ups[0].task, "failed_once");
  auto picky_first = execute(tasks, msg("later_picky", R"([700, ""])", 1), "default");
  CAF_CHECK(picky_first.state == outcome_state::retry);
  CAF_CHECK_EQUAL(picky_first.retry_delay_ms, 700);
  CAF_CHECK(execute(tasks, msg("later_picky", R"([700, ""])", 2), "default").state ==
            outcome_state::failed);
}

namespace {

// The options text the typed setters of troupe::message write.
template <class Set>
std::string options_by(Set set) {
  return set(make_message("default", "any", "[]")).options_json;
}

} // namespace

CAF_TEST(the options the message setters write are the ones the middleware reads) {
  using namespace std::chrono_literals;
  auto run = [&](std::string task, std::string args, std::int32_t attempt, std::string options,
                 std::int64_t enqueued_at_ms = 0) {
    return execute(
      tasks, msg(std::move(task), std::move(args), attempt, std::move(options), enqueued_at_ms),
      "default");
  };
  // max_retries
  CAF_CHECK(
    run("flaky", "[1]", 1, options_by([](auto m) { return m.with_max_retries(0); })).state ==
    outcome_state::failed);
  CAF_CHECK(
    run("flaky", "[1]", 3, options_by([](auto m) { return m.with_max_retries(5); })).state ==
    outcome_state::retry);
  // min_backoff and max_backoff (the task's are 100 ms and 1 s)
  auto slow = run("flaky", "[1]", 1,
                  options_by([](auto m) { return m.with_min_backoff(5s).with_max_backoff(1h); }));
  CAF_CHECK(slow.retry_delay_ms >= 5000 && slow.retry_delay_ms <= 10000);
  auto capped =
    run("flaky", "[1]", 2, options_by([](auto m) { return m.with_max_backoff(150ms); }));
  CAF_CHECK(capped.retry_delay_ms >= 75 && capped.retry_delay_ms <= 150);
  // max_age
  auto old =
    run("add_forget", "[1, 2]", 1, options_by([](auto m) { return m.with_max_age(1s); }), 1000);
  CAF_CHECK(contains(old.error_json, R"("type":"troupe::age_limit_exceeded")"));
  // time_limit
  auto limited =
    msg("add", "[1, 2]", 1, options_by([](auto m) { return m.with_time_limit(1234ms); }));
  CAF_CHECK_EQUAL(actors::time_limit_of(tasks, limited).count(), 1234);
  // store_results, both ways
  CAF_CHECK_EQUAL(
    run("add_forget", "[1, 2]", 1, options_by([](auto m) { return m.with_store_results(); }))
      .result_json,
    "3");
  CAF_CHECK(run("add", "[1, 2]", 1, options_by([](auto m) { return m.with_store_results(false); }))
              .result_json.empty());
  // notify_shutdown
  CAF_CHECK_EQUAL(
    run("told", "[]", 1, options_by([](auto m) { return m.with_notify_shutdown(); })).result_json,
    "true");
  CAF_CHECK_EQUAL(run("told", "[]", 1, "{}").result_json, "false");
  // on_success, on_failure, on_retry_exhausted; an empty name switches the task's off
  auto ok = run("flaky", "[0]", 1, options_by([](auto m) { return m.with_on_success("other"); }));
  CAF_REQUIRE_EQUAL(ok.follow_ups.size(), 1u);
  CAF_CHECK_EQUAL(ok.follow_ups[0].task, "other");
  CAF_CHECK(run("flaky", "[0]", 1, options_by([](auto m) { return m.with_on_success(""); }))
              .follow_ups.empty());
  auto failed = run("flaky", "[1]", 3, options_by([](auto m) {
                      return m.with_on_failure("alarm").with_on_retry_exhausted("refund");
                    }));
  CAF_REQUIRE_EQUAL(failed.follow_ups.size(), 2u);
  CAF_CHECK_EQUAL(failed.follow_ups[0].task, "alarm");
  CAF_CHECK_EQUAL(failed.follow_ups[1].task, "refund");
  CAF_CHECK(run("flaky", "[1]", 3, options_by([](auto m) {
                  return m.with_on_failure("").with_on_retry_exhausted("");
                }))
              .follow_ups.empty());
}

CAF_TEST_FIXTURE_SCOPE_END()
