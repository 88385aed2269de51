// The command lines of `troupe schedule SUB ...` and `troupe scheduler ...`: every value
// checked before any connection (the admin API checks the schedule itself again, naming the
// field).
#include "cli/arguments.hpp"

#include <charconv>

namespace troupe::cli {

namespace {

std::int32_t parse_int32(std::string_view text, std::string_view option) {
  std::int32_t value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec != std::errc{} || end != text.data() + text.size())
    throw usage_error("option " + std::string(option) + " needs an integer, got \"" + echo(text) +
                      "\"");
  return value;
}

void parse_create_option(argument_cursor& cur, const option_token& opt, schedule_spec& s) {
  auto value = [&] { return std::string(cur.value_of(opt)); };
  if (opt.name == "--task") {
    s.task = value();
    if (s.task.empty())
      throw usage_error("option --task needs a task name");
  } else if (opt.name == "--queue") {
    s.queue = parse_queue(cur.value_of(opt));
  } else if (opt.name == "--args") {
    s.args_json = value();
  } else if (opt.name == "--options") {
    s.options_json = value();
  } else if (opt.name == "--priority") {
    s.priority = parse_int32(cur.value_of(opt), opt.name);
  } else if (opt.name == "--every") {
    s.interval = parse_duration(cur.value_of(opt), opt.name);
  } else if (opt.name == "--cron") {
    s.cron = value();
    if (s.cron.empty())
      throw usage_error("option --cron needs an expression, such as \"30 2 * * *\"");
  } else if (opt.name == "--time-zone") {
    s.time_zone = value();
  } else if (opt.name == "--start-at") {
    auto text = cur.value_of(opt);
    auto ms = parse_time(text, opt.name);
    // The system clock counts nanoseconds in 64 bits: it ends in April 2262.
    constexpr std::int64_t clock_end_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(
        std::chrono::system_clock::time_point::max().time_since_epoch())
        .count();
    if (ms < 0 || ms >= clock_end_ms)
      throw usage_error("option --start-at needs a time from 1970 to 2262, got \"" + echo(text) +
                        "\"");
    s.start_at = std::chrono::system_clock::time_point(std::chrono::milliseconds(ms));
  } else if (opt.name == "--overlap") {
    auto v = cur.value_of(opt);
    if (v != "allow" && v != "skip")
      throw usage_error("option --overlap needs allow or skip, got \"" + echo(v) + "\"");
    s.overlap = v == "skip" ? overlap_policy::skip : overlap_policy::allow;
  } else if (opt.name == "--catch-up") {
    auto v = cur.value_of(opt);
    if (v != "coalesce" && v != "none")
      throw usage_error("option --catch-up needs coalesce or none, got \"" + echo(v) + "\"");
    s.catch_up = v == "none" ? catch_up_policy::none : catch_up_policy::coalesce;
  } else if (opt.name == "--jitter") {
    s.jitter = parse_duration(cur.value_of(opt), opt.name);
  } else if (opt.name == "--disabled") {
    reject_value(opt);
    s.enabled = false;
  } else {
    unknown_option(opt, "schedule create");
  }
}

} // namespace

void parse_schedule_options(argument_cursor& cur, command_line& cl) {
  if (!cur.done() && is_help(split_option(cur.peek()).name)) {
    cl.what = verb::help;
    return;
  }
  std::string_view sub = cur.done() ? std::string_view{} : cur.next();
  if (sub == "create")
    cl.what = verb::schedule_create;
  else if (sub == "list")
    cl.what = verb::schedule_list;
  else if (sub == "show")
    cl.what = verb::schedule_show;
  else if (sub == "enable")
    cl.what = verb::schedule_enable;
  else if (sub == "disable")
    cl.what = verb::schedule_disable;
  else if (sub == "delete")
    cl.what = verb::schedule_delete;
  else if (sub.empty())
    throw usage_error("schedule needs create, list, show, enable, disable or delete: troupe "
                      "schedule create NAME --task T --every 5min");
  else
    throw usage_error("unknown schedule verb \"" + echo(sub) +
                      "\" (expected create, list, show, enable, disable or delete)");
  std::string name = "schedule " + std::string(sub);
  bool has_target = false;
  while (!cur.done()) {
    auto arg = cur.next();
    if (!is_option(arg)) {
      if (cl.what == verb::schedule_list || has_target)
        unexpected_argument(arg, name);
      cl.target = std::string(arg);
      has_target = true;
      continue;
    }
    auto opt = split_option(arg);
    if (is_help(opt.name)) {
      cl.what = verb::help;
      return;
    }
    if (cl.what == verb::schedule_create)
      parse_create_option(cur, opt, cl.schedule);
    else if (cl.what == verb::schedule_show && opt.name == "--runs") {
      cl.runs = parse_int32(cur.value_of(opt), opt.name);
      if (cl.runs < 1 || cl.runs > 100)
        throw usage_error("option --runs needs an integer from 1 to 100, got " +
                          std::to_string(cl.runs));
    } else
      unknown_option(opt, name);
  }
  if (cl.what != verb::schedule_list && (!has_target || cl.target.empty()))
    throw usage_error(name + " needs a schedule name");
  if (cl.what == verb::schedule_create) {
    cl.schedule.name = cl.target;
    if (cl.schedule.task.empty())
      throw usage_error("schedule create needs --task T");
    if (!cl.schedule.interval && cl.schedule.cron.empty())
      throw usage_error("schedule create needs --every D or --cron EXPR");
    if (cl.schedule.interval && !cl.schedule.cron.empty())
      throw usage_error("schedule create takes --every or --cron, not both");
  }
}

void parse_scheduler_options(argument_cursor& cur, command_line& cl) {
  cl.what = verb::scheduler;
  while (!cur.done()) {
    auto arg = cur.next();
    if (!is_option(arg))
      unexpected_argument(arg, "scheduler");
    auto opt = split_option(arg);
    if (is_help(opt.name)) {
      cl.what = verb::help;
      return;
    }
    if (opt.name == "--once") {
      reject_value(opt);
      cl.once = true;
    } else if (opt.name == "--poll") {
      auto text = cur.value_of(opt);
      cl.poll = parse_duration(text, opt.name);
      if (cl.poll < std::chrono::milliseconds(10) || cl.poll > std::chrono::hours(1))
        throw usage_error("option --poll needs a duration from 10ms to 1h, got \"" + echo(text) +
                          "\"");
    } else if (opt.name == "--batch") {
      cl.batch = parse_limit(cur.value_of(opt), opt.name);
    } else {
      unknown_option(opt, "scheduler");
    }
  }
}

} // namespace troupe::cli
