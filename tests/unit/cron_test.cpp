// Cron expressions in UTC: what each field form matches, the day-of-month/day-of-week rule, the
// macros, and the text of every refusal. Daylight saving is in cron_dst_test.cpp. No database.
#define CAF_SUITE cron
#include <caf/test/unit_test.hpp>

#include "troupe/cron.hpp"
#include "troupe/error.hpp"

#include <date/date.h>

#include <chrono>
#include <cstdio>
#include <functional>
#include <stdexcept>
#include <string>

using troupe::cron_schedule;

namespace {

/// The text of the troupe::error `f` throws, or "(no error)".
std::string error_text(const std::function<void()>& f) {
  try {
    f();
  } catch (const troupe::error& e) {
    if (e.code() != troupe::errc::invalid_argument)
      return "(wrong error code) " + std::string(e.what());
    return e.what();
  }
  return "(no error)";
}

/// The text parsing `expression` in `zone` is refused with.
std::string refusal(const std::string& expression, const std::string& zone = "UTC") {
  return error_text([&] { cron_schedule::parse(expression, zone); });
}

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

/// The first `count` firings of `expression` after `from`, as UTC texts joined by ", ".
std::string firings(const std::string& expression, const std::string& from, int count = 1,
                    const std::string& zone = "UTC") {
  auto schedule = cron_schedule::parse(expression, zone);
  auto instant = at(from);
  std::string out;
  for (int i = 0; i < count; ++i) {
    instant = schedule.next_after(instant);
    out += (i == 0 ? "" : ", ") + iso(instant);
  }
  return out;
}

} // namespace

CAF_TEST(a star in every field fires at the start of every minute) {
  CAF_CHECK_EQUAL(firings("* * * * *", "2026-01-01T00:00:00Z", 3),
                  "2026-01-01T00:01:00Z, 2026-01-01T00:02:00Z, 2026-01-01T00:03:00Z");
  CAF_CHECK_EQUAL(firings("* * * * *", "2026-12-31T23:59:30Z"), "2027-01-01T00:00:00Z");
}

CAF_TEST(next_after is strictly after the instant it is given) {
  CAF_CHECK_EQUAL(firings("0 12 * * *", "2026-01-01T12:00:00Z"), "2026-01-02T12:00:00Z");
  auto schedule = cron_schedule::parse("0 12 * * *");
  auto just_before = at("2026-01-01T12:00:00Z") - std::chrono::nanoseconds{1};
  CAF_CHECK_EQUAL(iso(schedule.next_after(just_before)), "2026-01-01T12:00:00Z");
}

CAF_TEST(results fall on whole minutes even from a fractional instant) {
  auto schedule = cron_schedule::parse("*/5 * * * *");
  auto from = at("2026-01-01T00:02:00Z") + std::chrono::milliseconds{1234};
  auto next = schedule.next_after(from);
  CAF_CHECK_EQUAL(iso(next), "2026-01-01T00:05:00Z");
  CAF_CHECK_EQUAL((next.time_since_epoch() % std::chrono::minutes{1}).count(), 0);
}

CAF_TEST(lists ranges and steps combine within a field) {
  CAF_CHECK_EQUAL(firings("5,10-12,*/20 * * * *", "2026-01-01T00:00:00Z", 7),
                  "2026-01-01T00:05:00Z, 2026-01-01T00:10:00Z, 2026-01-01T00:11:00Z, "
                  "2026-01-01T00:12:00Z, 2026-01-01T00:20:00Z, 2026-01-01T00:40:00Z, "
                  "2026-01-01T01:00:00Z");
  CAF_CHECK_EQUAL(firings("10-30/10 * * * *", "2026-01-01T00:00:00Z", 4),
                  "2026-01-01T00:10:00Z, 2026-01-01T00:20:00Z, 2026-01-01T00:30:00Z, "
                  "2026-01-01T01:10:00Z");
  CAF_CHECK_EQUAL(firings("0 9-17/4 * * *", "2026-01-01T00:00:00Z", 4),
                  "2026-01-01T09:00:00Z, 2026-01-01T13:00:00Z, 2026-01-01T17:00:00Z, "
                  "2026-01-02T09:00:00Z");
}

CAF_TEST(a value with a step runs from that value to the field maximum) {
  CAF_CHECK_EQUAL(firings("45/5 * * * *", "2026-01-01T00:00:00Z", 4),
                  "2026-01-01T00:45:00Z, 2026-01-01T00:50:00Z, 2026-01-01T00:55:00Z, "
                  "2026-01-01T01:45:00Z");
  CAF_CHECK_EQUAL(firings("0 0 28/2 * *", "2026-01-01T00:00:00Z", 3),
                  "2026-01-28T00:00:00Z, 2026-01-30T00:00:00Z, 2026-02-28T00:00:00Z");
}

CAF_TEST(month and day names are accepted in any case) {
  CAF_CHECK_EQUAL(firings("0 0 1 JAN-mar *", "2026-02-15T00:00:00Z", 2),
                  "2026-03-01T00:00:00Z, 2027-01-01T00:00:00Z");
  // 2026-01-02 is a Friday.
  CAF_CHECK_EQUAL(firings("0 12 * * Mon-FRI", "2026-01-02T13:00:00Z"), "2026-01-05T12:00:00Z");
  CAF_CHECK_EQUAL(firings("0 0 * Feb,dec sun", "2026-01-01T00:00:00Z"), "2026-02-01T00:00:00Z");
}

CAF_TEST(both 0 and 7 stand for Sunday) {
  // 2026-01-01 is a Thursday; the 4th is the first Sunday.
  CAF_CHECK_EQUAL(firings("0 0 * * 0", "2026-01-01T00:00:00Z"), "2026-01-04T00:00:00Z");
  CAF_CHECK_EQUAL(firings("0 0 * * 7", "2026-01-01T00:00:00Z"), "2026-01-04T00:00:00Z");
  CAF_CHECK_EQUAL(firings("0 0 * * sun", "2026-01-01T00:00:00Z"), "2026-01-04T00:00:00Z");
  CAF_CHECK_EQUAL(firings("0 0 * * 5-7", "2026-01-01T00:00:00Z", 4),
                  "2026-01-02T00:00:00Z, 2026-01-03T00:00:00Z, 2026-01-04T00:00:00Z, "
                  "2026-01-09T00:00:00Z");
}

CAF_TEST(macros stand for their five fields) {
  auto from = "2026-01-01T00:00:00Z"; // a Thursday
  CAF_CHECK_EQUAL(firings("@yearly", from), "2027-01-01T00:00:00Z");
  CAF_CHECK_EQUAL(firings("@annually", from), "2027-01-01T00:00:00Z");
  CAF_CHECK_EQUAL(firings("@monthly", from), "2026-02-01T00:00:00Z");
  CAF_CHECK_EQUAL(firings("@weekly", from), "2026-01-04T00:00:00Z");
  CAF_CHECK_EQUAL(firings("@daily", from), "2026-01-02T00:00:00Z");
  CAF_CHECK_EQUAL(firings("@midnight", from), "2026-01-02T00:00:00Z");
  CAF_CHECK_EQUAL(firings("@hourly", from), "2026-01-01T01:00:00Z");
  CAF_CHECK_EQUAL(firings("@DAILY", from), "2026-01-02T00:00:00Z");
  auto daily = cron_schedule::parse("@daily");
  CAF_CHECK_EQUAL(daily.expression(), "@daily");
}

CAF_TEST(blanks between fields may be runs of spaces and tabs and the ends are trimmed) {
  auto schedule = cron_schedule::parse("  30\t 6  * *\t*  ");
  CAF_CHECK_EQUAL(schedule.expression(), "30\t 6  * *\t*");
  CAF_CHECK_EQUAL(iso(schedule.next_after(at("2026-01-01T00:00:00Z"))), "2026-01-01T06:30:00Z");
}

CAF_TEST(the time zone is kept as given and defaults to UTC) {
  auto in_utc = cron_schedule::parse("* * * * *");
  auto in_berlin = cron_schedule::parse("* * * * *", "Europe/Berlin");
  CAF_CHECK_EQUAL(in_utc.time_zone(), "UTC");
  CAF_CHECK_EQUAL(in_berlin.time_zone(), "Europe/Berlin");
}

CAF_TEST(copies share the parsed schedule) {
  auto schedule = cron_schedule::parse("15 3 * * *", "Asia/Kolkata");
  auto copy = schedule;
  CAF_CHECK_EQUAL(copy.expression(), "15 3 * * *");
  CAF_CHECK_EQUAL(iso(copy.next_after(at("2026-01-01T00:00:00Z"))), "2026-01-01T21:45:00Z");
}

CAF_TEST(a day matches either restricted day field) {
  // April 2026: Fridays are the 3rd, 10th, 17th and 24th; the 13th is a Monday.
  CAF_CHECK_EQUAL(firings("0 0 13 * fri", "2026-04-01T00:00:00Z", 4),
                  "2026-04-03T00:00:00Z, 2026-04-10T00:00:00Z, 2026-04-13T00:00:00Z, "
                  "2026-04-17T00:00:00Z");
}

CAF_TEST(a day field that is a star leaves the other alone to decide) {
  CAF_CHECK_EQUAL(firings("0 0 13 * *", "2026-04-01T00:00:00Z", 2),
                  "2026-04-13T00:00:00Z, 2026-05-13T00:00:00Z");
  CAF_CHECK_EQUAL(firings("0 0 * * fri", "2026-04-01T00:00:00Z", 2),
                  "2026-04-03T00:00:00Z, 2026-04-10T00:00:00Z");
}

CAF_TEST(a day field starting with a star and a step must match as well as the other) {
  // Odd days that are Mondays: April 2026 has Mondays on the 6th, 13th, 20th and 27th.
  CAF_CHECK_EQUAL(firings("0 0 */2 * mon", "2026-04-01T00:00:00Z", 3),
                  "2026-04-13T00:00:00Z, 2026-04-27T00:00:00Z, 2026-05-11T00:00:00Z");
}

CAF_TEST(a leap day schedule finds the next leap year) {
  CAF_CHECK_EQUAL(firings("0 0 29 2 *", "2026-01-01T00:00:00Z", 2),
                  "2028-02-29T00:00:00Z, 2032-02-29T00:00:00Z");
  // February 29th on a Sunday (*/7 on day of week is 0 and 7): 28 years apart.
  CAF_CHECK_EQUAL(firings("0 0 29 2 */7", "2026-01-01T00:00:00Z", 2),
                  "2032-02-29T00:00:00Z, 2060-02-29T00:00:00Z");
}

CAF_TEST(a field value out of range is refused with the field bounds) {
  CAF_CHECK_EQUAL(refusal("61 * * * *"),
                  "cron \"61 * * * *\": minute: 61 is out of range (0 to 59)");
  CAF_CHECK_EQUAL(refusal("0 24 * * *"), "cron \"0 24 * * *\": hour: 24 is out of range (0 to 23)");
  CAF_CHECK_EQUAL(refusal("0 0 0 * *"),
                  "cron \"0 0 0 * *\": day-of-month: 0 is out of range (1 to 31)");
  CAF_CHECK_EQUAL(refusal("0 0 * 13 *"),
                  "cron \"0 0 * 13 *\": month: 13 is out of range (1 to 12)");
  CAF_CHECK_EQUAL(refusal("0 0 * * 8"),
                  "cron \"0 0 * * 8\": day-of-week: 8 is out of range (0 to 7)");
  CAF_CHECK_EQUAL(refusal("0 0 1-99999999999 * *"),
                  "cron \"0 0 1-99999999999 * *\": day-of-month: 99999999999 is out of range "
                  "(1 to 31)");
}

CAF_TEST(a wrong number of fields is refused naming the five) {
  CAF_CHECK_EQUAL(refusal("* * * * * *"),
                  "cron \"* * * * * *\": 6 fields, a cron expression has 5 (minute hour "
                  "day-of-month month day-of-week)");
  CAF_CHECK_EQUAL(refusal("*"), "cron \"*\": 1 field, a cron expression has 5 (minute hour "
                                "day-of-month month day-of-week)");
  CAF_CHECK_EQUAL(refusal(" \t "), "cron \"\": the expression is empty; a cron expression has 5 "
                                   "fields (minute hour day-of-month month day-of-week) or is a "
                                   "macro such as @daily");
}

CAF_TEST(ranges and steps that make no sense are refused) {
  CAF_CHECK_EQUAL(refusal("* 5-2 * * *"), "cron \"* 5-2 * * *\": hour: range 5-2 runs backwards");
  CAF_CHECK_EQUAL(refusal("0 0 * * fri-mon"),
                  "cron \"0 0 * * fri-mon\": day-of-week: range fri-mon runs backwards");
  CAF_CHECK_EQUAL(refusal("*/0 * * * *"),
                  "cron \"*/0 * * * *\": minute: step 0 is out of range (1 to 59)");
  CAF_CHECK_EQUAL(refusal("0 */24 * * *"),
                  "cron \"0 */24 * * *\": hour: step 24 is out of range (1 to 23)");
  CAF_CHECK_EQUAL(refusal("*/x * * * *"),
                  "cron \"*/x * * * *\": minute: step \"x\" is not a number");
  CAF_CHECK_EQUAL(refusal("*/ * * * *"), "cron \"*/ * * * *\": minute: step \"\" is not a number");
  CAF_CHECK_EQUAL(refusal("1/2/3 * * * *"),
                  "cron \"1/2/3 * * * *\": minute: \"1/2/3\" has more than one step");
  CAF_CHECK_EQUAL(refusal("1-2-3 * * * *"),
                  "cron \"1-2-3 * * * *\": minute: \"1-2-3\" is not a valid range");
  CAF_CHECK_EQUAL(refusal("-5 * * * *"),
                  "cron \"-5 * * * *\": minute: \"-5\" is not a valid range");
  CAF_CHECK_EQUAL(refusal("*-5 * * * *"),
                  "cron \"*-5 * * * *\": minute: \"*-5\": * stands alone or before a step (*/n)");
  CAF_CHECK_EQUAL(refusal("1,,2 * * * *"),
                  "cron \"1,,2 * * * *\": minute: empty list item in \"1,,2\"");
  CAF_CHECK_EQUAL(refusal("0 0 1, * *"),
                  "cron \"0 0 1, * *\": day-of-month: empty list item in \"1,\"");
}

CAF_TEST(words that are not numbers or names are refused) {
  CAF_CHECK_EQUAL(refusal("* * * foo *"),
                  "cron \"* * * foo *\": month: \"foo\" is not a number or a month name");
  CAF_CHECK_EQUAL(refusal("* * * * funday"),
                  "cron \"* * * * funday\": day-of-week: \"funday\" is not a number or a day name");
  CAF_CHECK_EQUAL(refusal("jan * * * *"), "cron \"jan * * * *\": minute: \"jan\" is not a number");
  CAF_CHECK_EQUAL(refusal("0 0 ? * *"), "cron \"0 0 ? * *\": day-of-month: \"?\" is not a number");
}

CAF_TEST(an expression whose days never occur in its months is refused) {
  CAF_CHECK_EQUAL(refusal("* * 31 2 *"),
                  "cron \"* * 31 2 *\": never fires: day-of-month 31 does not occur in month 2");
  CAF_CHECK_EQUAL(refusal("0 0 30,31 feb */7"), "cron \"0 0 30,31 feb */7\": never fires: "
                                                "day-of-month 30,31 does not occur in month feb");
  CAF_CHECK_EQUAL(refusal("0 0 31 apr,jun,sep,nov *"),
                  "cron \"0 0 31 apr,jun,sep,nov *\": never fires: day-of-month 31 does not occur "
                  "in month apr,jun,sep,nov");
  // The classic rule lets the day of week fire on its own, so these do fire.
  CAF_CHECK_EQUAL(firings("0 0 31 2 mon", "2026-01-01T00:00:00Z"), "2026-02-02T00:00:00Z");
  CAF_CHECK_EQUAL(firings("0 0 31 2,3 *", "2026-01-01T00:00:00Z"), "2026-03-31T00:00:00Z");
}

CAF_TEST(unknown and unsupported macros are refused by name) {
  CAF_CHECK_EQUAL(refusal("@reboot"),
                  "cron \"@reboot\": macro @reboot is not supported (known macros: @yearly, "
                  "@annually, @monthly, @weekly, @daily, @midnight, @hourly)");
  CAF_CHECK_EQUAL(refusal("@fortnightly"),
                  "cron \"@fortnightly\": macro @fortnightly is not supported (known macros: "
                  "@yearly, @annually, @monthly, @weekly, @daily, @midnight, @hourly)");
  CAF_CHECK_EQUAL(refusal("@daily 5"), "cron \"@daily 5\": macro @daily takes no fields");
}

CAF_TEST(a time zone missing from the database is refused by name) {
  CAF_CHECK_EQUAL(refusal("0 * * * *", "Mars/Olympus"),
                  "cron \"0 * * * *\": time zone \"Mars/Olympus\" is not in the time zone "
                  "database");
  CAF_CHECK_EQUAL(refusal("0 * * * *", ""),
                  "cron \"0 * * * *\": time zone \"\" is not in the time zone database");
}
