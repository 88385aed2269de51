// `troupe states`: the state record of one message, a page of them, or their count. Its
// options are parsed here and checked again by the admin API, which names what it refuses.
#include "cli/arguments.hpp"
#include "cli/commands.hpp"
#include "cli/output.hpp"

#include "troupe/json.hpp"

namespace troupe::cli {

namespace {

constexpr std::string_view statuses[] = {"pending", "started", "success",
                                         "failure", "skipped", "cancelled"};
constexpr std::string_view sort_columns[] = {"message_id", "status",     "queue",    "task",
                                             "priority",   "attempts",   "progress", "enqueued_at",
                                             "started_at", "finished_at"};

template <std::size_t N>
bool one_of(std::string_view value, const std::string_view (&names)[N]) {
  for (auto n : names)
    if (n == value)
      return true;
  return false;
}

std::string time_or_null(const std::optional<std::int64_t>& ms) {
  return ms ? json_quote(iso_time(*ms)) : std::string("null");
}

} // namespace

std::string format_state_json(const message_state& m) {
  std::string out = R"({"message_id":)" + json_quote(m.message_id) + R"(,"status":)" +
                    json_quote(m.status) + R"(,"state":)" + json_quote(m.state) + R"(,"queue":)" +
                    json_quote(m.queue) + R"(,"task":)" + json_quote(m.task) + R"(,"priority":)" +
                    std::to_string(m.priority) + R"(,"attempts":)" + std::to_string(m.attempts) +
                    R"(,"progress":)" + (m.progress_json ? *m.progress_json : std::string("null")) +
                    R"(,"error":)" + (m.error_json.empty() ? std::string("null") : m.error_json) +
                    R"(,"cancel_requested":)" + (m.cancel_requested ? "true" : "false") +
                    R"(,"enqueued_at":)" + json_quote(iso_time(m.enqueued_at_ms)) +
                    R"(,"started_at":)" + time_or_null(m.started_at_ms) + R"(,"finished_at":)" +
                    time_or_null(m.finished_at_ms);
  if (m.args_json)
    out += R"(,"args":)" + *m.args_json;
  if (m.options_json)
    out += R"(,"options":)" + *m.options_json;
  if (m.result_json)
    out += R"(,"result":)" + *m.result_json;
  return out + "}";
}

void parse_states_options(argument_cursor& cur, command_line& cl) {
  auto& q = cl.states;
  auto& f = q.filter;
  bool has_target = false, filtered = false, paged = false, sorted = false;
  while (!cur.done()) {
    auto arg = cur.next();
    if (!is_option(arg)) {
      if (has_target)
        unexpected_argument(arg, "states");
      has_target = true;
      cl.target = parse_message_id(arg, "argument");
      continue;
    }
    auto opt = split_option(arg);
    if (is_help(opt.name)) {
      cl.what = verb::help;
      return;
    }
    auto time_value = [&]() {
      std::string v(cur.value_of(opt));
      if (v.empty())
        throw usage_error("option " + std::string(opt.name) + " needs a time");
      filtered = true;
      return v;
    };
    if (opt.name == "--status") {
      std::string s(cur.value_of(opt));
      if (!one_of(s, statuses))
        throw usage_error("option --status is \"" + echo(s) +
                          "\": it must be pending, started, success, failure, skipped or "
                          "cancelled (repeat it for several)");
      f.statuses.push_back(std::move(s));
      filtered = true;
    } else if (opt.name == "--task") {
      std::string t(cur.value_of(opt));
      if (t.empty())
        throw usage_error("option --task needs a task name");
      f.tasks.push_back(std::move(t));
      filtered = true;
    } else if (opt.name == "--queue") {
      f.queues.push_back(parse_queue(cur.value_of(opt)));
      filtered = true;
    } else if (opt.name == "--id") {
      f.message_ids.push_back(parse_message_id(cur.value_of(opt), "option --id"));
      filtered = true;
    } else if (opt.name == "--composition") {
      f.composition_ids.push_back(parse_message_id(cur.value_of(opt), "option --composition"));
      filtered = true;
    } else if (opt.name == "--enqueued-from") {
      f.enqueued_from = time_value();
    } else if (opt.name == "--enqueued-to") {
      f.enqueued_to = time_value();
    } else if (opt.name == "--finished-from") {
      f.finished_from = time_value();
    } else if (opt.name == "--finished-to") {
      f.finished_to = time_value();
    } else if (opt.name == "--sort") {
      std::string col(cur.value_of(opt));
      if (!one_of(col, sort_columns))
        throw usage_error("option --sort is \"" + echo(col) +
                          "\": it must be one of message_id, status, queue, task, priority, "
                          "attempts, progress, enqueued_at, started_at, finished_at");
      q.sort.column = std::move(col);
      sorted = true;
    } else if (opt.name == "--asc" || opt.name == "--desc") {
      reject_value(opt);
      q.sort.descending = opt.name == "--desc";
      sorted = true;
    } else if (opt.name == "--limit") {
      q.limit = parse_limit(cur.value_of(opt), opt.name);
      paged = true;
    } else if (opt.name == "--after") {
      std::string after(cur.value_of(opt));
      if (after.empty())
        throw usage_error("option --after needs the cursor a page gave (its next_after)");
      q.after = std::move(after);
      paged = true;
    } else if (opt.name == "--offset") {
      q.offset = parse_count(cur.value_of(opt), opt.name);
      paged = true;
    } else if (opt.name == "--payload") {
      reject_value(opt);
      q.payload = true;
    } else if (opt.name == "--count") {
      reject_value(opt);
      cl.count = true;
    } else {
      unknown_option(opt, "states");
    }
  }
  if (has_target && (filtered || paged || sorted || cl.count))
    throw usage_error("states takes a message id (and --payload), or filter and page options, "
                      "not both");
  if (q.after && q.offset > 0)
    throw usage_error("states takes --after or --offset, not both");
  if (cl.count && (paged || sorted || q.payload))
    throw usage_error("states --count takes filter options only");
}

int run_states(admin& a, const command_line& cl, std::ostream& out, std::ostream& err) {
  if (!cl.target.empty()) {
    auto s = a.get_state(cl.target, cl.states.payload);
    if (!s) {
      out << R"({"message_id":)" << json_quote(cl.target) << R"(,"status":null})" << '\n';
      err << "troupe: no message has id " << cl.target << '\n';
      return 1;
    }
    out << format_state_json(*s) << '\n';
    return 0;
  }
  if (cl.count) {
    auto n = a.get_states_count(cl.states.filter); // before any output: it may throw
    out << R"({"count":)" << n << "}\n";
    return 0;
  }
  auto page = a.get_states(cl.states);
  std::string text = R"({"items":[)";
  for (std::size_t i = 0; i < page.items.size(); ++i)
    text += (i > 0 ? "," : "") + format_state_json(page.items[i]);
  text += R"(],"next_after":)" +
          (page.next_after ? json_quote(*page.next_after) : std::string("null")) + "}";
  out << text << '\n';
  return 0;
}

} // namespace troupe::cli
