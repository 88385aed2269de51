// Schedules (migration 9): creating, reading, enabling and deleting them through the admin API,
// and what a scheduler's tick publishes under an injected clock: the interval's grid, missed
// intervals coalesced into one message, the overlap and catch-up policies, and a crash between
// the publish and the commit.
#define CAF_SUITE schedules
#include <caf/test/unit_test.hpp>

#include "scratch_area.hpp"
#include "storage/queries.hpp"
#include "troupe/admin.hpp"
#include "troupe/error.hpp"
#include "troupe/scheduler.hpp"

#include <fmt/format.h>

#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <functional>
#include <map>

using namespace troupe;
using namespace std::chrono_literals;
using std::chrono::system_clock;

namespace {

// 2026-12-01T00:00:00Z
constexpr std::int64_t t0 = 1796083200000;

system_clock::time_point at(std::int64_t ms) {
  return system_clock::time_point(std::chrono::milliseconds(ms));
}

struct fixture {
  testkit::scratch_area area;
  admin ops{admin_options{area.dsn(), area.where()}};
  std::shared_ptr<std::atomic<std::int64_t>> now = std::make_shared<std::atomic<std::int64_t>>(t0);

  scheduler_options options() {
    scheduler_options o;
    o.dsn = area.dsn();
    o.area = area.where();
    auto clock = now;
    o.clock = [clock] { return at(clock->load()); };
    return o;
  }

  /// One tick at `ms` on the injected clock; the occurrences it published.
  std::vector<schedule_occurrence> tick_at(std::int64_t ms) {
    now->store(ms);
    scheduler s(options());
    return s.tick();
  }

  static schedule_spec every(std::string name, std::chrono::milliseconds interval) {
    schedule_spec s;
    s.name = std::move(name);
    s.task = "report";
    s.queue = "reports";
    s.args_json = R"(["daily",3])";
    s.interval = interval;
    s.start_at = at(t0);
    return s;
  }

  std::int64_t messages(const std::string& where = "true") {
    return area.scalar(fmt::format("SELECT count(*) FROM {} WHERE task_name = 'report' AND {}",
                                   area.queue_table(), where));
  }

  std::string refusal(const std::function<void()>& f, errc code = errc::invalid_argument) {
    try {
      f();
    } catch (const error& e) {
      if (e.code() != code)
        return "(wrong code) " + std::string(e.what());
      return e.what();
    }
    return "(no error)";
  }
};

bool has(const std::string& text, const std::string& part) {
  if (text.find(part) != std::string::npos)
    return true;
  CAF_MESSAGE("missing \"" << part << "\" in: " << text);
  return false;
}

} // namespace

CAF_TEST_FIXTURE_SCOPE(schedule_tests, fixture)

CAF_TEST(an interval schedule publishes on its grid and coalesces missed intervals into one) {
  auto created = ops.create_schedule(every("daily-report", 10s));
  CAF_CHECK_EQUAL(created.next_run_ms, t0);
  auto first = tick_at(t0);
  CAF_REQUIRE_EQUAL(first.size(), 1u);
  CAF_CHECK_EQUAL(first[0].outcome, "published");
  CAF_CHECK_EQUAL(first[0].occurrence_ms, t0);
  CAF_CHECK_EQUAL(first[0].next_run_ms, t0 + 10'000);
  CAF_CHECK(tick_at(t0 + 5'000).empty());
  CAF_CHECK_EQUAL(tick_at(t0 + 10'000).size(), 1u);
  // 55 s later: five occurrences passed; one message, and the next run back on the grid.
  auto late = tick_at(t0 + 65'000);
  CAF_REQUIRE_EQUAL(late.size(), 1u);
  CAF_CHECK_EQUAL(late[0].occurrence_ms, t0 + 20'000);
  CAF_CHECK_EQUAL(late[0].next_run_ms, t0 + 70'000);
  CAF_CHECK(tick_at(t0 + 69'999).empty());
  CAF_CHECK_EQUAL(messages(), 3);
  // The messages are the template's, on its queue, each with the id derived from its occurrence.
  CAF_CHECK_EQUAL(messages("queue_name = 'reports' AND args = '[\"daily\", 3]'::jsonb"), 3);
  CAF_CHECK_EQUAL(messages(fmt::format("message_id = '{}'", late[0].message_id)), 1);
  auto s = ops.schedule("daily-report");
  CAF_REQUIRE(s.has_value());
  CAF_CHECK_EQUAL(s->published, 3);
  CAF_CHECK_EQUAL(s->next_run_ms, t0 + 70'000);
  CAF_CHECK_EQUAL(s->last_outcome, "published");
  CAF_CHECK_EQUAL(s->last_message_id, late[0].message_id);
  CAF_CHECK_EQUAL(s->last_message_state, "queued");
}

CAF_TEST(
  a schedule is refused with an error that names what is wrong and a name is never overwritten) {
  auto s = every("nightly", 1min);
  ops.create_schedule(s);
  auto again = every("nightly", 5min);
  CAF_CHECK(has(refusal([&] { ops.create_schedule(again); }, errc::constraint_violated),
                "schedule \"nightly\" exists already"));
  auto kept = ops.schedule("nightly");
  CAF_REQUIRE(kept.has_value());
  CAF_CHECK_EQUAL(kept->interval_ms.value_or(0), 60'000);
  auto bad = every("bad", 0ms);
  CAF_CHECK(has(refusal([&] { ops.create_schedule(bad); }),
                "schedule \"bad\": interval 0 ms is out of range"));
  bad = every("bad", 1s);
  bad.cron = "* * * * *";
  CAF_CHECK(has(refusal([&] { ops.create_schedule(bad); }), "an interval or a cron expression, "
                                                            "not both"));
  bad = every("bad", 1s);
  bad.interval.reset();
  bad.cron = "61 * * * *";
  CAF_CHECK(has(refusal([&] { ops.create_schedule(bad); }), "minute"));
  bad.cron = "0 3 * * *";
  bad.time_zone = "Mars/Olympus";
  CAF_CHECK(has(refusal([&] { ops.create_schedule(bad); }), "Mars/Olympus"));
  bad = every("bad", 1s);
  bad.args_json = R"({"not":"an array"})";
  CAF_CHECK(has(refusal([&] { ops.create_schedule(bad); }), "are not a JSON array"));
  bad = every("bad", 1s);
  bad.queue = "no spaces";
  CAF_CHECK(has(refusal([&] { ops.create_schedule(bad); }), "schedule \"bad\""));
  bad = every("bad", 1s);
  bad.jitter = 48h;
  CAF_CHECK(has(refusal([&] { ops.create_schedule(bad); }), "jitter"));
  bad = every("", 1s);
  CAF_CHECK(has(refusal([&] { ops.create_schedule(bad); }), "a schedule needs a name"));
  bad = every("bad", 1s);
  bad.task = std::string(300, 't');
  CAF_CHECK(has(refusal([&] { ops.create_schedule(bad); }), "task name is longer than 255"));
  bad = every("bad", 1min);
  bad.time_zone = "Europe/Berlin";
  CAF_CHECK(has(refusal([&] { ops.create_schedule(bad); }),
                "time zone \"Europe/Berlin\" applies to cron schedules only"));
  CAF_CHECK_EQUAL(ops.schedules().size(), 1u);
}

CAF_TEST(a schedule whose message is refused fails alone and the others are published) {
  ops.create_schedule(every("a-good", 10s));
  ops.create_schedule(every("b-refused", 10s));
  // A row written past the rules (by hand, or by an older release): the queue table refuses
  // its message.
  area.sql().exec(fmt::format("UPDATE {}.{} SET task_name = repeat('t', 300) WHERE name = "
                              "'b-refused'",
                              storage::quote_identifier(area.where().schema),
                              storage::quote_identifier(area.where().prefix + "schedules")));
  auto done = tick_at(t0 + 1'000);
  CAF_REQUIRE_EQUAL(done.size(), 2u);
  std::map<std::string, schedule_occurrence> by_name;
  for (const auto& o : done)
    by_name[o.schedule] = o;
  CAF_CHECK_EQUAL(by_name["a-good"].outcome, "published");
  CAF_CHECK_EQUAL(by_name["b-refused"].outcome, "failed");
  CAF_CHECK(!by_name["b-refused"].error.empty());
  CAF_CHECK_EQUAL(messages(), 1);
  auto refused = ops.schedule("b-refused");
  CAF_REQUIRE(refused.has_value());
  CAF_CHECK_EQUAL(refused->last_outcome, "failed");
  CAF_CHECK(!refused->last_error.empty());
  CAF_CHECK_EQUAL(refused->next_run_ms, t0 + 10'000);
  // The next tick goes on with both: the refused one does not hold up the good one.
  auto next = tick_at(t0 + 10'500);
  CAF_CHECK_EQUAL(next.size(), 2u);
  CAF_CHECK_EQUAL(messages(), 2);
}

CAF_TEST(catch up none publishes an interval shorter than the poll) {
  auto s = every("quick", 500ms);
  s.catch_up = catch_up_policy::none;
  ops.create_schedule(s);
  // The scheduler polls every second: each tick finds the occurrence up to a poll late, with a
  // later one due too, and publishes it.
  scheduler sched(options());
  int published = 0;
  for (int i = 1; i <= 5; ++i) {
    now->store(t0 + i * 1'000);
    for (const auto& o : sched.tick())
      published += o.outcome == "published" ? 1 : 0;
  }
  CAF_CHECK_EQUAL(published, 5);
}

CAF_TEST(a list never shows arguments and show reports a task that no node runs) {
  ops.create_schedule(every("b-second", 1min));
  ops.create_schedule(every("a-first", 1min));
  auto all = ops.schedules();
  CAF_REQUIRE_EQUAL(all.size(), 2u);
  CAF_CHECK_EQUAL(all[0].name, "a-first");
  CAF_CHECK(!all[0].args_json.has_value());
  CAF_CHECK(!all[0].options_json.has_value());
  auto shown = ops.schedule("a-first");
  CAF_REQUIRE(shown.has_value());
  CAF_CHECK_EQUAL(*shown->args_json, R"(["daily", 3])");
  CAF_CHECK(shown->registered_by.empty());
  // A node that registers the task.
  storage::node_identity who{"reports-node", "host", 1, {"reports"}, {"other", "report"}};
  storage::register_node(area.sql(), area.statements(), who);
  auto registered = ops.schedule("a-first");
  CAF_REQUIRE(registered.has_value());
  CAF_CHECK_EQUAL(registered->registered_by, std::vector<std::string>{"reports-node"});
  CAF_CHECK_EQUAL(ops.upcoming_runs("a-first", 3),
                  (std::vector<std::int64_t>{t0, t0 + 60'000, t0 + 120'000}));
  CAF_CHECK(!ops.schedule("missing").has_value());
}

CAF_TEST(a disabled schedule publishes nothing and a deleted one is gone) {
  ops.create_schedule(every("paused", 10s));
  CAF_CHECK(ops.disable_schedule("paused"));
  CAF_CHECK(ops.disable_schedule("paused")); // idempotent
  CAF_CHECK(!ops.disable_schedule("unknown"));
  CAF_CHECK(tick_at(t0 + 30'000).empty());
  CAF_CHECK(ops.enable_schedule("paused"));
  // Enabled again, the passed occurrences coalesce (the default catch-up).
  CAF_CHECK_EQUAL(tick_at(t0 + 30'000).size(), 1u);
  CAF_CHECK(ops.delete_schedule("paused"));
  CAF_CHECK(!ops.delete_schedule("paused"));
  CAF_CHECK(tick_at(t0 + 60'000).empty());
  CAF_CHECK_EQUAL(messages(), 1);
}

CAF_TEST(overlap skip publishes nothing while the previous message is queued or running) {
  auto s = every("exclusive", 10s);
  s.overlap = overlap_policy::skip;
  ops.create_schedule(s);
  auto first = tick_at(t0);
  CAF_REQUIRE_EQUAL(first.size(), 1u);
  auto skipped = tick_at(t0 + 10'000);
  CAF_REQUIRE_EQUAL(skipped.size(), 1u);
  CAF_CHECK_EQUAL(skipped[0].outcome, "overlap");
  auto recorded = ops.schedule("exclusive");
  CAF_REQUIRE(recorded.has_value());
  CAF_CHECK_EQUAL(recorded->last_outcome, "overlap");
  area.sql().exec(fmt::format("UPDATE {} SET state = 'done', finished_at = now() WHERE "
                              "message_id = '{}'",
                              area.queue_table(), first[0].message_id));
  auto next = tick_at(t0 + 20'000);
  CAF_REQUIRE_EQUAL(next.size(), 1u);
  CAF_CHECK_EQUAL(next[0].outcome, "published");
  CAF_CHECK_EQUAL(messages(), 2);
}

CAF_TEST(catch up none drops the occurrences found late and runs the next one) {
  auto s = every("fresh-only", 10s);
  s.catch_up = catch_up_policy::none;
  ops.create_schedule(s);
  auto late = tick_at(t0 + 35'000);
  CAF_REQUIRE_EQUAL(late.size(), 1u);
  CAF_CHECK_EQUAL(late[0].outcome, "missed");
  CAF_CHECK_EQUAL(late[0].next_run_ms, t0 + 40'000);
  // Found a second late, with no later occurrence due: it runs.
  auto on_time = tick_at(t0 + 41'000);
  CAF_REQUIRE_EQUAL(on_time.size(), 1u);
  CAF_CHECK_EQUAL(on_time[0].outcome, "published");
  CAF_CHECK_EQUAL(messages(), 1);
}

CAF_TEST(
  a crash between the publish and the commit leaves the occurrence due and it is published once) {
  ops.create_schedule(every("crashy", 10s));
  auto pid = ::fork();
  CAF_REQUIRE(pid >= 0);
  if (pid == 0) {
    // The child publishes the occurrence and ends before its commit.
    auto o = options();
    o.before_commit = [] { ::_exit(7); };
    try {
      scheduler s(std::move(o));
      s.tick();
    } catch (...) {
    }
    ::_exit(1);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  CAF_REQUIRE(WIFEXITED(status));
  CAF_CHECK_EQUAL(WEXITSTATUS(status), 7);
  CAF_CHECK_EQUAL(messages(), 0);
  auto due = ops.schedule("crashy");
  CAF_REQUIRE(due.has_value());
  CAF_CHECK_EQUAL(due->next_run_ms, t0);
  auto after = tick_at(t0);
  CAF_REQUIRE_EQUAL(after.size(), 1u);
  CAF_CHECK_EQUAL(after[0].outcome, "published");
  CAF_CHECK(tick_at(t0).empty());
  CAF_CHECK_EQUAL(messages(), 1);
}

CAF_TEST(schedules on an area before migration 9 are refused naming the upgrade) {
  auto old = area.older_area("v8_", 8);
  admin older{admin_options{area.dsn(), old}};
  CAF_CHECK(has(refusal([&] { older.schedules(); }),
                "schedules need migration 9 (the area is at version 8): run troupe upgrade"));
}

CAF_TEST_FIXTURE_SCOPE_END()
