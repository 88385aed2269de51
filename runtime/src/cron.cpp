// Parsing cron expressions into bit sets per field, and finding the next matching local minute
// with calendar jumps (month, day, hour, minute) rather than minute-by-minute steps. Time zones
// come from the system's tz database through Howard Hinnant's date library.
#include "troupe/cron.hpp"

#include "troupe/error.hpp"

#include <date/tz.h>
#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <optional>
#include <span>
#include <utility>
#include <vector>

namespace troupe {

namespace {

using std::chrono::minutes;
using std::chrono::seconds;
using local_minutes = date::local_time<minutes>;

/// How far next_after searches before giving up. Parse refuses expressions that never fire, and
/// every possible day recurs well within one 400-year Gregorian cycle.
constexpr date::years search_horizon{500};

constexpr std::string_view month_names[] = {"jan", "feb", "mar", "apr", "may", "jun",
                                            "jul", "aug", "sep", "oct", "nov", "dec"};
constexpr std::string_view day_names[] = {"sun", "mon", "tue", "wed", "thu", "fri", "sat"};

/// The most days each month can have (february in a leap year).
constexpr unsigned max_days_in_month[] = {31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};

/// The five fields in order, as errors name them.
constexpr std::string_view field_list = "minute hour day-of-month month day-of-week";

/// A macro and the five fields it stands for.
struct cron_macro {
  std::string_view name;
  std::string_view fields;
};

constexpr cron_macro macros[] = {
  {"@yearly", "0 0 1 1 *"}, {"@annually", "0 0 1 1 *"}, {"@monthly", "0 0 1 * *"},
  {"@weekly", "0 0 * * 0"}, {"@daily", "0 0 * * *"},    {"@midnight", "0 0 * * *"},
  {"@hourly", "0 * * * *"},
};

/// One of the five fields: its name in errors, its bounds and the names its values may take
/// (names[i] stands for min + i).
struct field_spec {
  std::string_view name;
  int min;
  int max;
  std::span<const std::string_view> names = {};
  std::string_view name_kind = {};
};

constexpr field_spec minute_spec{"minute", 0, 59};
constexpr field_spec hour_spec{"hour", 0, 23};
constexpr field_spec day_of_month_spec{"day-of-month", 1, 31};
constexpr field_spec month_spec{"month", 1, 12, month_names, "a month name"};
constexpr field_spec day_of_week_spec{"day-of-week", 0, 7, day_names, "a day name"};

[[noreturn]] void refuse(std::string_view expression, std::string_view why) {
  throw error(errc::invalid_argument, fmt::format("cron \"{}\": {}", expression, why));
}

bool is_blank(char c) {
  return c == ' ' || c == '\t';
}

std::string_view trim(std::string_view text) {
  constexpr std::string_view space = " \t\r\n\f\v";
  auto first = text.find_first_not_of(space);
  if (first == std::string_view::npos)
    return {};
  return text.substr(first, text.find_last_not_of(space) - first + 1);
}

std::vector<std::string_view> split_fields(std::string_view text) {
  std::vector<std::string_view> fields;
  std::size_t i = 0;
  while (i < text.size()) {
    while (i < text.size() && is_blank(text[i]))
      ++i;
    auto start = i;
    while (i < text.size() && !is_blank(text[i]))
      ++i;
    if (i > start)
      fields.push_back(text.substr(start, i - start));
  }
  return fields;
}

std::string lowercase(std::string_view text) {
  std::string out(text);
  for (auto& c : out)
    if (c >= 'A' && c <= 'Z')
      c = static_cast<char>(c - 'A' + 'a');
  return out;
}

bool all_digits(std::string_view text) {
  return !text.empty() &&
         std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
}

/// The lowest set bit of `mask` at `from` or above, or -1.
int next_bit(std::uint64_t mask, int from) {
  if (from > 63)
    return -1;
  auto rest = mask >> from;
  return rest == 0 ? -1 : from + std::countr_zero(rest);
}

bool has_bit(std::uint64_t mask, unsigned bit) {
  return ((mask >> bit) & 1u) != 0;
}

/// Reads one field's text into a bit set, refusing anything outside the field's rules.
class field_parser {
public:
  field_parser(std::string_view expression, const field_spec& spec)
      : expression_(expression), spec_(spec) {}

  std::uint64_t parse(std::string_view field) const {
    std::uint64_t mask = 0;
    std::size_t start = 0;
    for (;;) {
      auto comma = field.find(',', start);
      auto item = field.substr(start, comma == std::string_view::npos ? comma : comma - start);
      if (item.empty())
        fail(fmt::format("empty list item in \"{}\"", field));
      mask |= parse_item(item);
      if (comma == std::string_view::npos)
        return mask;
      start = comma + 1;
    }
  }

private:
  [[noreturn]] void fail(std::string_view why) const {
    refuse(expression_, fmt::format("{}: {}", spec_.name, why));
  }

  /// One list item: `*`, `n`, `a-b`, each optionally followed by `/step`.
  std::uint64_t parse_item(std::string_view item) const {
    auto slash = item.find('/');
    auto base = item.substr(0, slash);
    int step = 1;
    if (slash != std::string_view::npos) {
      auto step_text = item.substr(slash + 1);
      if (step_text.find('/') != std::string_view::npos)
        fail(fmt::format("\"{}\" has more than one step", item));
      if (!all_digits(step_text))
        fail(fmt::format("step \"{}\" is not a number", step_text));
      auto max_step = spec_.max - spec_.min;
      step = step_text.size() > 9 ? max_step + 1 : std::stoi(std::string(step_text));
      if (step < 1 || step > max_step)
        fail(fmt::format("step {} is out of range (1 to {})", step_text, max_step));
    }
    int low = spec_.min;
    int high = spec_.max;
    if (base.find('*') != std::string_view::npos) {
      if (base != "*")
        fail(fmt::format("\"{}\": * stands alone or before a step (*/n)", item));
    } else if (auto dash = base.find('-'); dash == std::string_view::npos) {
      low = parse_value(base);
      high = slash == std::string_view::npos ? low : spec_.max;
    } else {
      auto first = base.substr(0, dash);
      auto last = base.substr(dash + 1);
      if (first.empty() || last.empty() || last.find('-') != std::string_view::npos)
        fail(fmt::format("\"{}\" is not a valid range", base));
      low = parse_value(first);
      high = parse_value(last);
      if (low > high)
        fail(fmt::format("range {} runs backwards", base));
    }
    std::uint64_t mask = 0;
    for (int v = low; v <= high; v += step)
      mask |= std::uint64_t{1} << v;
    return mask;
  }

  /// A number within the field's bounds, or one of its names.
  int parse_value(std::string_view text) const {
    if (all_digits(text)) {
      auto value = text.size() > 9 ? spec_.max + 1 : std::stoi(std::string(text));
      if (value < spec_.min || value > spec_.max)
        fail(fmt::format("{} is out of range ({} to {})", text, spec_.min, spec_.max));
      return value;
    }
    auto lower = lowercase(text);
    for (std::size_t i = 0; i < spec_.names.size(); ++i)
      if (spec_.names[i] == lower)
        return spec_.min + static_cast<int>(i);
    if (spec_.names.empty())
      fail(fmt::format("\"{}\" is not a number", text));
    fail(fmt::format("\"{}\" is not a number or {}", text, spec_.name_kind));
  }

  std::string_view expression_;
  const field_spec& spec_;
};

/// The parsed pattern: which minutes, hours, days and months match, on the local wall clock.
struct cron_fields {
  std::uint64_t minute_bits = 0;
  std::uint64_t hour_bits = 0;
  std::uint64_t day_of_month_bits = 0;
  std::uint64_t month_bits = 0;
  std::uint64_t day_of_week_bits = 0; // bit 0 is Sunday; 7 is folded into it
  /// Both day fields are restricted, so a day matches if either matches (classic cron rule).
  bool either_day = false;

  bool matches_day(date::local_days day) const {
    date::year_month_day ymd{day};
    auto dom = has_bit(day_of_month_bits, static_cast<unsigned>(ymd.day()));
    auto dow = has_bit(day_of_week_bits, date::weekday{day}.c_encoding());
    return either_day ? dom || dow : dom && dow;
  }

  /// The first matching local minute at `from` or later, or none within search_horizon. Jumps
  /// to the next matching month, day, hour and minute instead of stepping minute by minute.
  std::optional<local_minutes> next_match(local_minutes from) const {
    auto day = date::floor<date::days>(from);
    auto minute_of_day = static_cast<int>((from - day).count());
    const auto last_year = date::year_month_day{day}.year() + search_horizon;
    auto next_day = [&] {
      day += date::days{1};
      minute_of_day = 0;
    };
    for (;;) {
      date::year_month_day ymd{day};
      if (ymd.year() > last_year)
        return std::nullopt;
      auto month = static_cast<unsigned>(ymd.month());
      if (!has_bit(month_bits, month)) {
        auto later = next_bit(month_bits, static_cast<int>(month) + 1);
        auto year = later > 0 ? ymd.year() : ymd.year() + date::years{1};
        auto first = later > 0 ? later : next_bit(month_bits, 1);
        day = date::local_days{year / date::month{static_cast<unsigned>(first)} / 1};
        minute_of_day = 0;
        continue;
      }
      if (!matches_day(day)) {
        next_day();
        continue;
      }
      auto current_hour = minute_of_day / 60;
      auto hour = next_bit(hour_bits, current_hour);
      if (hour < 0) {
        next_day();
        continue;
      }
      auto minute = next_bit(minute_bits, hour == current_hour ? minute_of_day % 60 : 0);
      if (minute < 0) {
        minute_of_day = (hour + 1) * 60;
        if (minute_of_day >= 24 * 60)
          next_day();
        continue;
      }
      return local_minutes{day.time_since_epoch()} + std::chrono::hours{hour} + minutes{minute};
    }
  }
};

/// Refuses an expression whose day fields can never meet a month (`* * 31 2 *`). Only day of
/// month against month can make that happen: every weekday comes round in every month.
void refuse_if_never_fires(std::string_view expression, const cron_fields& fields,
                           std::string_view dom_text, std::string_view month_text) {
  if (fields.either_day)
    return;
  for (unsigned month = 1; month <= 12; ++month)
    if (has_bit(fields.month_bits, month) &&
        next_bit(fields.day_of_month_bits, 1) <= static_cast<int>(max_days_in_month[month - 1]))
      return;
  refuse(expression, fmt::format("never fires: day-of-month {} does not occur in month {}",
                                 dom_text, month_text));
}

/// Reads the five fields (or the macro) of an already trimmed expression.
cron_fields parse_fields(std::string_view expression) {
  if (expression.empty())
    refuse(expression, fmt::format("the expression is empty; a cron expression has 5 fields ({}) "
                                   "or is a macro such as @daily",
                                   field_list));
  auto fields = split_fields(expression);
  if (expression.front() == '@') {
    auto name = lowercase(fields.front());
    auto known = std::find_if(std::begin(macros), std::end(macros),
                              [&](const cron_macro& m) { return m.name == name; });
    if (known == std::end(macros))
      refuse(expression, fmt::format("macro {} is not supported (known macros: @yearly, "
                                     "@annually, @monthly, @weekly, @daily, @midnight, @hourly)",
                                     fields.front()));
    if (fields.size() > 1)
      refuse(expression, fmt::format("macro {} takes no fields", fields.front()));
    fields = split_fields(known->fields);
  }
  if (fields.size() != 5)
    refuse(expression, fmt::format("{} field{}, a cron expression has 5 ({})", fields.size(),
                                   fields.size() == 1 ? "" : "s", field_list));
  cron_fields out;
  out.minute_bits = field_parser(expression, minute_spec).parse(fields[0]);
  out.hour_bits = field_parser(expression, hour_spec).parse(fields[1]);
  out.day_of_month_bits = field_parser(expression, day_of_month_spec).parse(fields[2]);
  out.month_bits = field_parser(expression, month_spec).parse(fields[3]);
  out.day_of_week_bits = field_parser(expression, day_of_week_spec).parse(fields[4]);
  if (has_bit(out.day_of_week_bits, 7))
    out.day_of_week_bits = (out.day_of_week_bits | 1u) & ~(std::uint64_t{1} << 7);
  out.either_day = fields[2].front() != '*' && fields[4].front() != '*';
  refuse_if_never_fires(expression, out, fields[2], fields[3]);
  return out;
}

/// The instant a local minute fires at: itself when the clock shows it once, its first
/// occurrence when the clock shows it twice, and the end of the gap when the clock skips it.
date::sys_seconds firing_instant(const date::local_info& info, local_minutes local) {
  if (info.result == date::local_info::nonexistent)
    return info.second.begin;
  return date::sys_seconds{local.time_since_epoch() - info.first.offset};
}

} // namespace

struct cron_schedule::impl {
  std::string expression;
  std::string time_zone;
  const date::time_zone* zone = nullptr; // owned by the date library's tz database
  cron_fields fields;
};

cron_schedule::cron_schedule(std::shared_ptr<const impl> state) : impl_(std::move(state)) {}

cron_schedule cron_schedule::parse(std::string_view expression, std::string_view time_zone) {
  auto state = std::make_shared<impl>();
  state->expression = std::string(trim(expression));
  state->time_zone = std::string(time_zone);
  state->fields = parse_fields(state->expression);
  try {
    state->zone = date::locate_zone(time_zone);
  } catch (const std::exception&) {
    refuse(state->expression,
           fmt::format("time zone \"{}\" is not in the time zone database", time_zone));
  }
  return cron_schedule(std::move(state));
}

cron_schedule::time_point cron_schedule::next_after(time_point after) const {
  // Whole seconds suffice: every firing instant is a whole second, so "strictly after `after`"
  // and "strictly after its floor" pick the same instant, and seconds cannot overflow below.
  auto after_seconds = date::floor<seconds>(after);
  const auto& zone = *impl_->zone;
  auto from = date::floor<minutes>(zone.to_local(after_seconds)) + minutes{1};
  for (;;) {
    auto local = impl_->fields.next_match(from);
    if (!local)
      throw error(errc::bug, fmt::format("cron \"{}\": no occurrence within {} years",
                                         impl_->expression, search_horizon.count()));
    auto info = zone.get_info(*local);
    auto fires = firing_instant(info, *local);
    if (fires > after_seconds) {
      if (fires > date::floor<seconds>(time_point::max()))
        throw error(errc::invalid_argument,
                    fmt::format("cron \"{}\": the next occurrence lies past the end of "
                                "system_clock",
                                impl_->expression));
      return time_point{fires};
    }
    // Only when `after` lies in the second pass of a repeated hour: those local minutes already
    // fired at their first occurrence, so resume where the repetition ends.
    from = *local + minutes{1};
    if (info.result == date::local_info::ambiguous) {
      auto repeat_end =
        date::local_seconds{(info.first.end + info.first.offset).time_since_epoch()};
      from = std::max(from, date::ceil<minutes>(repeat_end));
    }
  }
}

const std::string& cron_schedule::expression() const noexcept {
  return impl_->expression;
}

const std::string& cron_schedule::time_zone() const noexcept {
  return impl_->time_zone;
}

} // namespace troupe
