#include "cli/arguments.hpp"

#include "troupe/area.hpp"
#include "troupe/dsn.hpp"
#include "troupe/message.hpp"

#include <charconv>
#include <chrono>
#include <limits>

namespace troupe::cli {

bool is_option(std::string_view arg) {
  return arg.size() > 1 && arg[0] == '-';
}

option_token split_option(std::string_view arg) {
  if (arg.starts_with("--")) {
    if (auto eq = arg.find('='); eq != std::string_view::npos)
      return {arg.substr(0, eq), arg.substr(eq + 1)};
  }
  return {arg, std::nullopt};
}

bool is_help(std::string_view name) {
  return name == "-h" || name == "--help";
}

bool is_global_option(std::string_view name) {
  return name == "--dsn" || name == "--schema" || name == "--prefix";
}

std::string echo(std::string_view typed) {
  return redact_secrets(typed);
}

std::string_view argument_cursor::value_of(const option_token& opt) {
  if (opt.inline_value)
    return *opt.inline_value;
  if (done())
    throw usage_error("option " + std::string(opt.name) + " needs a value");
  return next();
}

void reject_value(const option_token& opt) {
  if (opt.inline_value)
    throw usage_error("option " + std::string(opt.name) + " takes no value");
}

[[noreturn]] void unknown_option(const option_token& opt, std::string_view verb_name) {
  std::string msg = "unknown option " + echo(opt.name) + " for " + std::string(verb_name);
  if (is_global_option(opt.name))
    msg += " (global options go before the verb)";
  throw usage_error(msg);
}

[[noreturn]] void unexpected_argument(std::string_view arg, std::string_view verb_name) {
  throw usage_error("unexpected argument " + echo(arg) + " for " + std::string(verb_name));
}

std::int32_t parse_limit(std::string_view text, std::string_view option) {
  int value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec != std::errc{} || end != text.data() + text.size() || value < 1 ||
      value > 1000)
    throw usage_error("option " + std::string(option) + " needs an integer from 1 to 1000, got \"" +
                      echo(text) + "\"");
  return value;
}

std::string parse_message_id(std::string_view text, std::string_view what) {
  std::string canonical;
  if (!parse_uuid(text, canonical))
    throw usage_error(std::string(what) + " \"" + echo(text) + "\" is not a message id (a UUID)");
  return canonical;
}

std::string parse_queue(std::string_view text) {
  std::string queue(text);
  validate([&] { validate_queue_name(queue); });
  return queue;
}

std::int64_t parse_count(std::string_view text, std::string_view option) {
  std::int64_t value = -1;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec != std::errc{} || end != text.data() + text.size() || value < 0)
    throw usage_error("option " + std::string(option) + " needs a non-negative integer, got \"" +
                      echo(text) + "\"");
  return value;
}

std::chrono::milliseconds parse_duration(std::string_view text, std::string_view option) {
  auto bad = [&] {
    return usage_error("option " + std::string(option) +
                       " needs a duration such as 500ms, 90s, 5min, 2h or 1d, got \"" + echo(text) +
                       "\"");
  };
  std::int64_t n = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
  if (ec != std::errc{} || end == text.data() || n < 0)
    throw bad();
  std::string_view unit(end, static_cast<std::size_t>(text.data() + text.size() - end));
  std::int64_t scale = unit == "ms"    ? 1
                       : unit == "s"   ? 1000
                       : unit == "min" ? 60'000
                       : unit == "h"   ? 3'600'000
                       : unit == "d"   ? 86'400'000
                                       : 0;
  if (scale == 0 || n > std::numeric_limits<std::int64_t>::max() / scale)
    throw bad();
  return std::chrono::milliseconds(n * scale);
}

std::int64_t parse_time(std::string_view text, std::string_view option) {
  // YYYY-MM-DDTHH:MM[:SS[.fff]] then Z or +HH:MM / -HH:MM.
  auto bad = [&] {
    return usage_error("option " + std::string(option) +
                       " needs an ISO-8601 time with its offset, such as 2026-12-01T02:30:00Z "
                       "or 2026-12-01T02:30:00+01:00, got \"" +
                       echo(text) + "\"");
  };
  std::size_t pos = 0;
  auto digits = [&](std::size_t n) {
    if (pos + n > text.size())
      throw bad();
    int v = 0;
    for (std::size_t i = 0; i < n; ++i) {
      char c = text[pos + i];
      if (c < '0' || c > '9')
        throw bad();
      v = v * 10 + (c - '0');
    }
    pos += n;
    return v;
  };
  auto expect = [&](char c) {
    if (pos >= text.size() || text[pos] != c)
      throw bad();
    ++pos;
  };
  int year = digits(4);
  expect('-');
  int month = digits(2);
  expect('-');
  int day = digits(2);
  if (pos >= text.size() || (text[pos] != 'T' && text[pos] != ' '))
    throw bad();
  ++pos;
  int hour = digits(2);
  expect(':');
  int minute = digits(2);
  int second = 0;
  int millis = 0;
  if (pos < text.size() && text[pos] == ':') {
    ++pos;
    second = digits(2);
    if (pos < text.size() && text[pos] == '.') {
      ++pos;
      int scale = 100;
      std::size_t start = pos;
      while (pos < text.size() && text[pos] >= '0' && text[pos] <= '9') {
        millis += (text[pos] - '0') * scale;
        scale /= 10;
        ++pos;
      }
      if (pos == start)
        throw bad();
    }
  }
  int offset_min = 0;
  if (pos < text.size() && (text[pos] == 'Z' || text[pos] == 'z')) {
    ++pos;
  } else if (pos < text.size() && (text[pos] == '+' || text[pos] == '-')) {
    int sign = text[pos] == '-' ? -1 : 1;
    ++pos;
    int oh = digits(2);
    expect(':');
    int om = digits(2);
    if (oh > 23 || om > 59)
      throw bad();
    offset_min = sign * (oh * 60 + om);
  } else {
    throw bad();
  }
  if (pos != text.size())
    throw bad();
  using namespace std::chrono;
  year_month_day ymd{std::chrono::year(year), std::chrono::month(static_cast<unsigned>(month)),
                     std::chrono::day(static_cast<unsigned>(day))};
  if (!ymd.ok() || hour > 23 || minute > 59 || second > 59)
    throw bad();
  auto local =
    sys_days(ymd) + hours(hour) + minutes(minute) + seconds(second) + milliseconds(millis);
  return duration_cast<milliseconds>((local - minutes(offset_min)).time_since_epoch()).count();
}

} // namespace troupe::cli
