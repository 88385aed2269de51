// Schedulers at work: a daily cron schedule across both daylight-saving changes of a year under
// an injected clock, four schedulers on one area publishing every occurrence exactly once over
// many ticks, and a worker node that runs one ([schedules] enabled) beside its consumers.
#define CAF_SUITE scheduler
#include <caf/test/unit_test.hpp>

#include "node_harness.hpp"
#include "troupe/admin.hpp"
#include "troupe/scheduler.hpp"

#include <fmt/format.h>

#include <atomic>
#include <map>
#include <mutex>
#include <set>
#include <thread>

using namespace troupe;
using namespace std::chrono_literals;
using std::chrono::system_clock;

namespace {

system_clock::time_point at(std::int64_t ms) {
  return system_clock::time_point(std::chrono::milliseconds(ms));
}

constexpr std::int64_t minute = 60'000;
constexpr std::int64_t hour = 60 * minute;

struct fixture {
  testkit::scratch_area area;
  admin ops{admin_options{area.dsn(), area.where()}};

  scheduler_options options(std::shared_ptr<std::atomic<std::int64_t>> now) {
    scheduler_options o;
    o.dsn = area.dsn();
    o.area = area.where();
    o.clock = [now] { return at(now->load()); };
    return o;
  }

  /// Ticks one scheduler every 10 minutes of the injected clock from `from` to `to`; the
  /// occurrences it published.
  std::vector<std::int64_t> published_between(std::int64_t from, std::int64_t to) {
    auto now = std::make_shared<std::atomic<std::int64_t>>(from);
    scheduler s(options(now));
    std::vector<std::int64_t> out;
    for (auto t = from; t <= to; t += 10 * minute) {
      now->store(t);
      for (const auto& o : s.tick())
        if (o.outcome == "published")
          out.push_back(o.occurrence_ms);
    }
    return out;
  }

  schedule_spec nightly(std::string name, std::int64_t start) {
    schedule_spec s;
    s.name = std::move(name);
    s.task = "nightly";
    s.cron = "30 2 * * *";
    s.time_zone = "Europe/Berlin";
    s.start_at = at(start);
    return s;
  }
};

} // namespace

CAF_TEST_FIXTURE_SCOPE(scheduler_tests, fixture)

CAF_TEST(a daily 02 30 run in Berlin runs once on the spring forward and the fall back days) {
  // 2026-03-29: 02:00 CET becomes 03:00 CEST, so 02:30 does not exist: it runs at 03:00 CEST.
  constexpr std::int64_t march_28_noon = 1774699200000; // 2026-03-28T12:00:00Z
  ops.create_schedule(nightly("spring", march_28_noon));
  auto spring = published_between(march_28_noon, march_28_noon + 72 * hour);
  CAF_CHECK_EQUAL(spring, (std::vector<std::int64_t>{
                            march_28_noon + 13 * hour,               // 2026-03-29T01:00Z
                            march_28_noon + 36 * hour + 30 * minute, // 2026-03-30T00:30Z
                            march_28_noon + 60 * hour + 30 * minute, // 2026-03-31T00:30Z
                          }));
  ops.delete_schedule("spring");
  // 2026-10-25: 03:00 CEST becomes 02:00 CET, so 02:30 comes twice: it runs at the first.
  constexpr std::int64_t october_24_noon = 1792843200000; // 2026-10-24T12:00:00Z
  ops.create_schedule(nightly("autumn", october_24_noon));
  auto autumn = published_between(october_24_noon, october_24_noon + 48 * hour);
  CAF_CHECK_EQUAL(autumn, (std::vector<std::int64_t>{
                            october_24_noon + 12 * hour + 30 * minute, // 2026-10-25T00:30Z
                            october_24_noon + 37 * hour + 30 * minute, // 2026-10-26T01:30Z
                          }));
}

CAF_TEST(four schedulers on one area publish every occurrence exactly once) {
  constexpr std::int64_t start = 1796083200000; // 2026-12-01T00:00:00Z
  constexpr int schedules = 5;
  constexpr int steps = 150;
  for (int i = 0; i < schedules; ++i) {
    schedule_spec s;
    s.name = fmt::format("every-second-{}", i);
    s.task = "beat";
    s.args_json = fmt::format("[{}]", i);
    s.interval = 1s;
    s.start_at = at(start);
    ops.create_schedule(s);
  }
  auto now = std::make_shared<std::atomic<std::int64_t>>(start);
  std::atomic<bool> stop{false};
  std::mutex m;
  std::vector<std::pair<std::string, std::int64_t>> reported;
  std::vector<std::thread> runners;
  for (int r = 0; r < 4; ++r)
    runners.emplace_back([&] {
      scheduler s(options(now));
      while (!stop.load())
        for (const auto& o : s.tick()) {
          std::lock_guard g{m};
          if (o.outcome == "published")
            reported.emplace_back(o.schedule, o.occurrence_ms);
        }
    });
  // The clock moves one interval at a time, once every schedule has caught up with it.
  auto caught_up = [&](std::int64_t t) {
    return area.scalar(fmt::format("SELECT count(*) FROM {}.{}schedules WHERE next_run <= "
                                   "to_timestamp(0) + {} * interval '1 millisecond'",
                                   area.where().schema, area.where().prefix, t)) == 0;
  };
  bool kept_up = true;
  for (int step = 0; step <= steps && kept_up; ++step) {
    now->store(start + step * 1000);
    kept_up = testkit::wait_until([&] { return caught_up(start + step * 1000); }, 20s);
  }
  stop.store(true);
  for (auto& t : runners)
    t.join();
  CAF_REQUIRE(kept_up);
  // Each schedule published each of its steps + 1 occurrences once: as the schedulers report
  // it, as the queue holds it, and as the schedule counts it.
  constexpr std::size_t expected = schedules * (steps + 1);
  CAF_CHECK_EQUAL(reported.size(), expected);
  std::set<std::pair<std::string, std::int64_t>> distinct(reported.begin(), reported.end());
  CAF_CHECK_EQUAL(distinct.size(), expected);
  CAF_CHECK_EQUAL(area.scalar(fmt::format("SELECT count(*) FROM {} WHERE task_name = 'beat'",
                                          area.queue_table())),
                  static_cast<std::int64_t>(expected));
  for (const auto& s : ops.schedules())
    CAF_CHECK_EQUAL(s.published, steps + 1);
}

CAF_TEST(a worker node with its scheduler on publishes occurrences that its consumers run) {
  testkit::node_harness h;
  task_ref<void(int)> beat{"beat"};
  auto runs = std::make_shared<std::atomic<int>>(0);
  h.tasks->define(beat, [runs](int) { runs->fetch_add(1); });
  admin here{admin_options{h.area.dsn(), h.area.where()}};
  schedule_spec s;
  s.name = "heartbeat";
  s.task = "beat";
  s.args_json = "[1]";
  s.interval = 200ms;
  here.create_schedule(s);
  auto o = h.options();
  o.name = "scheduling-node";
  o.scheduler.enabled = true;
  o.scheduler.poll = 50ms;
  h.start_node(o);
  CAF_REQUIRE(testkit::wait_until([&] { return runs->load() >= 3; }, 20s));
  auto shown = here.schedule("heartbeat");
  CAF_REQUIRE(shown.has_value());
  CAF_CHECK_GREATER_OR_EQUAL(shown->published, 3);
  CAF_CHECK_EQUAL(shown->registered_by, std::vector<std::string>{"scheduling-node"});
  h.stop();
  // Stopped, the node publishes no more.
  auto after = here.schedule("heartbeat")->published;
  CAF_CHECK_EQUAL(h.count("task_name = 'beat'"), after);
}

CAF_TEST_FIXTURE_SCOPE_END()
