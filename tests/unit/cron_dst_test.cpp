// Cron expressions on a local wall clock that jumps: a local time skipped by a spring-forward
// gap fires once at the end of the gap, one repeated by a fall-back fires at its first
// occurrence only. Uses the system's tz database. No database.
#define CAF_SUITE cron_dst
#include <caf/test/unit_test.hpp>

#include "troupe/cron.hpp"

#include <date/date.h>

#include <chrono>
#include <cstdio>
#include <stdexcept>
#include <string>

using troupe::cron_schedule;

namespace {

/// The instant a UTC text such as "2026-03-29T01:00:00Z" names.
cron_schedule::time_point at(const std::string& text) {
  int year = 0;
  unsigned month = 0, day = 0;
  int hour = 0, minute = 0, second = 0;
  char zulu = 0;
  if (std::sscanf(text.c_str(), "%d-%u-%uT%d:%d:%d%c", &year, &month, &day, &hour, &minute, &second,
                  &zulu) != 7 ||
      zulu != 'Z')
    throw std::invalid_argument("not an ISO instant: " + text);
  return date::sys_days{date::year{year} / date::month{month} / date::day{day}} +
         std::chrono::hours{hour} + std::chrono::minutes{minute} + std::chrono::seconds{second};
}

std::string iso(cron_schedule::time_point instant) {
  return date::format("%FT%TZ", date::floor<std::chrono::seconds>(instant));
}

/// The first `count` firings of `expression` in `zone` after `from`, as UTC texts joined by
/// ", ".
std::string firings(const std::string& expression, const std::string& zone, const std::string& from,
                    int count = 1) {
  auto schedule = cron_schedule::parse(expression, zone);
  auto instant = at(from);
  std::string out;
  for (int i = 0; i < count; ++i) {
    instant = schedule.next_after(instant);
    out += (i == 0 ? "" : ", ") + iso(instant);
  }
  return out;
}

// Europe/Berlin 2026: clocks jump 02:00 CET -> 03:00 CEST on 2026-03-29 (01:00Z) and fall
// back 03:00 CEST -> 02:00 CET on 2026-10-25 (01:00Z).
constexpr const char* berlin = "Europe/Berlin";

} // namespace

CAF_TEST(local times follow the zone offset in winter and in summer) {
  CAF_CHECK_EQUAL(firings("0 9 * * *", berlin, "2026-01-10T00:00:00Z"), "2026-01-10T08:00:00Z");
  CAF_CHECK_EQUAL(firings("0 9 * * *", berlin, "2026-07-10T00:00:00Z"), "2026-07-10T07:00:00Z");
  CAF_CHECK_EQUAL(firings("0 0 * * *", "Asia/Kolkata", "2026-01-10T00:00:00Z"),
                  "2026-01-10T18:30:00Z");
}

CAF_TEST(a local time skipped by spring forward fires once at the end of the gap) {
  CAF_CHECK_EQUAL(firings("30 2 * * *", berlin, "2026-03-28T12:00:00Z", 2),
                  "2026-03-29T01:00:00Z, 2026-03-30T00:30:00Z");
}

CAF_TEST(several local times inside one gap fire once together) {
  CAF_CHECK_EQUAL(firings("0,15,30,45 2 * * *", berlin, "2026-03-28T12:00:00Z", 2),
                  "2026-03-29T01:00:00Z, 2026-03-30T00:00:00Z");
  // 02:00, 02:30 and 03:00 local all land on 01:00Z; 03:30 CEST follows.
  CAF_CHECK_EQUAL(firings("0,30 2,3 * * *", berlin, "2026-03-28T12:00:00Z", 3),
                  "2026-03-29T01:00:00Z, 2026-03-29T01:30:00Z, 2026-03-30T00:00:00Z");
}

CAF_TEST(an hourly schedule across spring forward fires at the end of the gap) {
  CAF_CHECK_EQUAL(firings("30 * * * *", berlin, "2026-03-28T23:00:00Z", 5),
                  "2026-03-28T23:30:00Z, 2026-03-29T00:30:00Z, 2026-03-29T01:00:00Z, "
                  "2026-03-29T01:30:00Z, 2026-03-29T02:30:00Z");
}

CAF_TEST(a local time repeated by fall back fires at its first occurrence only) {
  CAF_CHECK_EQUAL(firings("30 2 * * *", berlin, "2026-10-24T12:00:00Z", 2),
                  "2026-10-25T00:30:00Z, 2026-10-26T01:30:00Z");
}

CAF_TEST(an hourly schedule across fall back skips the repeated hour) {
  CAF_CHECK_EQUAL(firings("30 * * * *", berlin, "2026-10-24T23:00:00Z", 4),
                  "2026-10-24T23:30:00Z, 2026-10-25T00:30:00Z, 2026-10-25T02:30:00Z, "
                  "2026-10-25T03:30:00Z");
}

CAF_TEST(every minute goes quiet while the clock repeats an hour) {
  CAF_CHECK_EQUAL(firings("* * * * *", berlin, "2026-10-25T00:58:00Z", 3),
                  "2026-10-25T00:59:00Z, 2026-10-25T02:00:00Z, 2026-10-25T02:01:00Z");
}

CAF_TEST(asking from inside the repeated hour resumes after it) {
  // 01:10Z is 02:10 CET, the second pass: 02:15 already fired at 00:15Z.
  CAF_CHECK_EQUAL(firings("*/15 * * * *", berlin, "2026-10-25T01:10:00Z", 2),
                  "2026-10-25T02:00:00Z, 2026-10-25T02:15:00Z");
  CAF_CHECK_EQUAL(firings("30 2 * * *", berlin, "2026-10-25T01:10:00Z"), "2026-10-26T01:30:00Z");
}

CAF_TEST(New York skips 02 : 30 in March and repeats 01 : 30 in November) {
  // 2026-03-08: 02:00 EST -> 03:00 EDT at 07:00Z. 2026-11-01: 02:00 EDT -> 01:00 EST at 06:00Z.
  auto new_york = "America/New_York";
  CAF_CHECK_EQUAL(firings("30 2 * * *", new_york, "2026-03-07T12:00:00Z", 2),
                  "2026-03-08T07:00:00Z, 2026-03-09T06:30:00Z");
  CAF_CHECK_EQUAL(firings("30 1 * * *", new_york, "2026-10-31T12:00:00Z", 2),
                  "2026-11-01T05:30:00Z, 2026-11-02T06:30:00Z");
}

CAF_TEST(half - hour shifts follow the same rules) {
  // Lord Howe Island: 02:00 -> 01:30 on 2026-04-05 and 02:00 -> 02:30 on 2026-10-04.
  auto lord_howe = "Australia/Lord_Howe";
  CAF_CHECK_EQUAL(firings("45 1 * * *", lord_howe, "2026-04-04T00:00:00Z", 2),
                  "2026-04-04T14:45:00Z, 2026-04-05T15:15:00Z");
  CAF_CHECK_EQUAL(firings("15 2 * * *", lord_howe, "2026-10-03T00:00:00Z", 2),
                  "2026-10-03T15:30:00Z, 2026-10-04T15:15:00Z");
}
