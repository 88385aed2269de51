// `troupe history`: the area's attempt history, on or off, a message's attempts, and their
// purge. Each prints one JSON object.
#include "cli/arguments.hpp"
#include "cli/commands.hpp"
#include "cli/output.hpp"

#include "troupe/json.hpp"

#include <charconv>

namespace troupe::cli {

namespace {

std::string setting_json(const history_setting& s) {
  return std::string(R"({"attempt_history":)") + (s.enabled ? "true" : "false") +
         R"(,"changed_at":)" + json_quote(iso_time(s.changed_at_ms)) + "}";
}

std::string attempt_json(const attempt_record& a) {
  auto text_or_null = [](const std::string& s) {
    return s.empty() ? std::string("null") : json_quote(s);
  };
  return R"({"attempt_id":)" + (a.attempt_id ? std::to_string(*a.attempt_id) : "null") +
         R"(,"message_id":)" + json_quote(a.message_id) + R"(,"attempt":)" +
         std::to_string(a.attempt) + R"(,"queue":)" + json_quote(a.queue) + R"(,"task":)" +
         json_quote(a.task) + R"(,"node_id":)" + (a.node_id ? std::to_string(*a.node_id) : "null") +
         R"(,"started_at":)" + json_quote(iso_time(a.started_at_ms)) + R"(,"finished_at":)" +
         (a.finished_at_ms ? json_quote(iso_time(*a.finished_at_ms)) : "null") + R"(,"outcome":)" +
         json_quote(a.outcome) + R"(,"error_type":)" + text_or_null(a.error_type) +
         R"(,"error_text":)" + text_or_null(a.error_text) + R"(,"duration_ms":)" +
         (a.duration_ms ? std::to_string(*a.duration_ms) : "null") + "}";
}

} // namespace

std::string format_attempt_page_json(const attempt_page& page) {
  std::string text = R"({"items":[)";
  for (std::size_t i = 0; i < page.items.size(); ++i)
    text += (i > 0 ? "," : "") + attempt_json(page.items[i]);
  return text + R"(],"next_after":)" +
         (page.next_after ? std::to_string(*page.next_after) : std::string("null")) + "}";
}

void parse_history_options(argument_cursor& cur, command_line& cl) {
  if (!cur.done() && is_help(split_option(cur.peek()).name)) {
    cl.what = verb::help;
    return;
  }
  std::string_view sub = cur.done() ? std::string_view{} : cur.next();
  if (sub == "enable" || sub == "disable" || sub == "status") {
    cl.what = sub == "enable"    ? verb::history_on
              : sub == "disable" ? verb::history_off
                                 : verb::history_status;
  } else if (sub == "list") {
    cl.what = verb::history_list;
  } else if (sub == "purge") {
    cl.what = verb::history_purge;
  } else {
    throw usage_error("history needs enable, disable, status, list or purge: troupe history "
                      "list ID, troupe history purge --max-age I");
  }
  std::string name = "history " + std::string(sub);
  bool has_target = false;
  while (!cur.done()) {
    auto arg = cur.next();
    if (!is_option(arg)) {
      if (cl.what != verb::history_list || has_target)
        unexpected_argument(arg, name);
      cl.target = parse_message_id(arg, "argument");
      has_target = true;
      continue;
    }
    auto opt = split_option(arg);
    if (is_help(opt.name)) {
      cl.what = verb::help;
      return;
    }
    if (cl.what == verb::history_list && opt.name == "--limit") {
      cl.limit = parse_limit(cur.value_of(opt), opt.name);
    } else if (cl.what == verb::history_list && opt.name == "--after") {
      cl.after_attempt = parse_count(cur.value_of(opt), opt.name);
    } else if (cl.what == verb::history_purge && opt.name == "--max-age") {
      cl.max_age = std::string(cur.value_of(opt));
      if (cl.max_age.empty())
        throw usage_error("option --max-age needs an interval, such as '30 days'");
    } else {
      unknown_option(opt, name);
    }
  }
  if (cl.what == verb::history_list && !has_target)
    throw usage_error("history list needs a message id");
  if (cl.what == verb::history_purge && cl.max_age.empty())
    throw usage_error("history purge needs --max-age I (a PostgreSQL interval, such as '30 days')");
}

int run_history(admin& a, const command_line& cl, std::ostream& out) {
  switch (cl.what) {
  case verb::history_on:
  case verb::history_off:
    out << setting_json(a.set_attempt_history(cl.what == verb::history_on)) << '\n';
    return 0;
  case verb::history_status:
    out << setting_json(a.attempt_history()) << '\n';
    return 0;
  case verb::history_purge: {
    auto n = a.purge_history(cl.max_age);
    out << R"({"deleted":)" << n << R"(,"max_age":)" << json_quote(cl.max_age) << "}\n";
    return 0;
  }
  default: {
    out << format_attempt_page_json(a.history(cl.target, cl.after_attempt, cl.limit)) << '\n';
    return 0;
  }
  }
}

} // namespace troupe::cli
