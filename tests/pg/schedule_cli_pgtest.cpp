// `troupe schedule` and `troupe scheduler` against a scratch area: what each verb prints, the
// refusals that name the bad value, and `troupe scheduler --once` publishing what is due.
#define CAF_SUITE schedule_cli
#include <caf/test/unit_test.hpp>

#include "cli_runner.hpp"

#include <fmt/format.h>

using namespace troupe;
using testkit::shell_quote;
using testkit::troupe_cli;

namespace {

bool has(const std::string& text, const std::string& part) {
  if (text.find(part) != std::string::npos)
    return true;
  CAF_MESSAGE("missing \"" << part << "\" in: " << text);
  return false;
}

struct fixture {
  testkit::scratch_area area;
  std::string global = fmt::format("--dsn {} --schema {} --prefix {}", shell_quote(area.dsn()),
                                   area.where().schema, shell_quote(area.where().prefix));
};

} // namespace

CAF_TEST_FIXTURE_SCOPE(schedule_cli_tests, fixture)

CAF_TEST(schedule verbs create list show disable and delete with JSON output) {
  auto made = troupe_cli(global + " schedule create nightly --task report --queue reports "
                                  "--args '[\"secret-arg\"]' --cron '30 2 * * *' --time-zone "
                                  "Europe/Berlin --overlap skip --jitter 30s");
  CAF_CHECK_EQUAL(made.status, 0);
  CAF_CHECK(has(made.out, R"("name":"nightly")"));
  CAF_CHECK(has(made.out, R"("cron":"30 2 * * *","time_zone":"Europe/Berlin")"));
  CAF_CHECK(has(made.out, R"("overlap":"skip")"));
  CAF_CHECK(has(made.out, R"("jitter_ms":30000)"));
  CAF_CHECK(has(made.out, R"("next_runs":[")"));
  auto again = troupe_cli(global + " schedule create nightly --task report --every 1min");
  CAF_CHECK_EQUAL(again.status, 1);
  CAF_CHECK(has(again.out, "schedule \"nightly\" exists already"));
  auto list = troupe_cli(global + " schedule list");
  CAF_CHECK_EQUAL(list.status, 0);
  CAF_CHECK(has(list.out, R"({"items":[{"id":)"));
  CAF_CHECK(list.out.find("secret-arg") == std::string::npos);
  auto shown = troupe_cli(global + " schedule show nightly --runs 2");
  CAF_CHECK_EQUAL(shown.status, 0);
  CAF_CHECK(has(shown.out, R"("args":["secret-arg"])"));
  CAF_CHECK(has(shown.out, "no registered node runs task \\\"report\\\""));
  auto off = troupe_cli(global + " schedule disable nightly");
  CAF_CHECK_EQUAL(off.status, 0);
  CAF_CHECK(has(off.out, R"({"schedule":"nightly","found":true,"enabled":false})"));
  CAF_CHECK(has(troupe_cli(global + " schedule show nightly").out, R"("enabled":false)"));
  auto missing = troupe_cli(global + " schedule enable nosuch");
  CAF_CHECK_EQUAL(missing.status, 1);
  CAF_CHECK(has(missing.out, "no schedule \"nosuch\""));
  auto gone = troupe_cli(global + " schedule delete nightly");
  CAF_CHECK_EQUAL(gone.status, 0);
  CAF_CHECK(has(gone.out, R"("deleted":true)"));
  CAF_CHECK(has(troupe_cli(global + " schedule list").out, R"({"items":[]})"));
}

CAF_TEST(bad schedule input is refused naming the value) {
  auto cron = troupe_cli(global + " schedule create x --task t --cron '61 * * * *'");
  CAF_CHECK_EQUAL(cron.status, 1);
  CAF_CHECK(has(cron.out, "minute"));
  auto every = troupe_cli(global + " schedule create x --task t --every 5 parsecs");
  CAF_CHECK_EQUAL(every.status, 2);
  CAF_CHECK(has(every.out, "option --every needs a duration"));
  auto start = troupe_cli(global + " schedule create x --task t --every 1s --start-at 2026-12-01");
  CAF_CHECK_EQUAL(start.status, 2);
  CAF_CHECK(has(start.out, "ISO-8601 time with its offset"));
  auto neither = troupe_cli(global + " schedule create x --task t");
  CAF_CHECK_EQUAL(neither.status, 2);
  CAF_CHECK(has(neither.out, "needs --every D or --cron EXPR"));
  auto policy = troupe_cli(global + " schedule create x --task t --every 1s --overlap never");
  CAF_CHECK_EQUAL(policy.status, 2);
  CAF_CHECK(has(policy.out, "option --overlap needs allow or skip"));
  auto poll = troupe_cli(global + " scheduler --poll 1ms");
  CAF_CHECK_EQUAL(poll.status, 2);
  CAF_CHECK(has(poll.out, "option --poll needs a duration from 10ms to 1h"));
  auto far = troupe_cli(global + " schedule create x --task t --every 1s "
                                 "--start-at 2800-01-01T00:00:00Z");
  CAF_CHECK_EQUAL(far.status, 2);
  CAF_CHECK(has(far.out, "option --start-at needs a time from 1970 to 2262"));
  auto zone =
    troupe_cli(global + " schedule create x --task t --every 1d --time-zone Europe/Berlin");
  CAF_CHECK_EQUAL(zone.status, 1);
  CAF_CHECK(has(zone.out, "applies to cron schedules only"));
  auto sub = troupe_cli(global + " schedule creat x");
  CAF_CHECK_EQUAL(sub.status, 2);
  CAF_CHECK(has(sub.out, "unknown schedule verb \"creat\""));
  auto batch = troupe_cli(global + " scheduler --once --batch 0");
  CAF_CHECK_EQUAL(batch.status, 2);
  CAF_CHECK(has(batch.out, "option --batch needs an integer from 1 to 1000"));
}

CAF_TEST(scheduler batch bounds how many schedules one tick takes) {
  for (int i = 0; i < 3; ++i)
    CAF_REQUIRE_EQUAL(troupe_cli(global + fmt::format(" schedule create beat{} --task beat "
                                                      "--every 1h --start-at 2026-01-01T00:00:00Z",
                                                      i))
                        .status,
                      0);
  auto two = troupe_cli(global + " scheduler --once --batch 2");
  CAF_CHECK_EQUAL(two.status, 0);
  CAF_CHECK(has(two.out, R"({"published":2,)"));
  CAF_CHECK(has(troupe_cli(global + " scheduler --once --batch 2").out, R"({"published":1,)"));
}

CAF_TEST(scheduler once publishes what is due and prints it) {
  CAF_REQUIRE_EQUAL(troupe_cli(global + " schedule create beat --task beat --every 1h "
                                        "--start-at 2026-01-01T00:00:00Z")
                      .status,
                    0);
  auto once = troupe_cli(global + " scheduler --once");
  CAF_CHECK_EQUAL(once.status, 0);
  CAF_CHECK(has(once.out, R"({"published":1,"occurrences":[{"schedule":"beat")"));
  CAF_CHECK(has(once.out, R"("outcome":"published")"));
  CAF_CHECK_EQUAL(area.scalar(fmt::format("SELECT count(*) FROM {} WHERE task_name = 'beat'",
                                          area.queue_table())),
                  1);
  CAF_CHECK(
    has(troupe_cli(global + " scheduler --once").out, R"({"published":0,"occurrences":[]})"));
}

CAF_TEST_FIXTURE_SCOPE_END()
