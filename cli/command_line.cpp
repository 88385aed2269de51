#include "cli/command_line.hpp"

#include "cli/arguments.hpp"

#include "troupe/admin.hpp"
#include "troupe/dsn.hpp"
#include "troupe/error.hpp"
#include "troupe/message.hpp"

#include <charconv>
#include <cstddef>

namespace troupe::cli {

namespace {

int parse_version(std::string_view text, std::string_view option) {
  int value = -1;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  bool digits_only = !text.empty() && text[0] != '-' && text[0] != '+';
  if (!digits_only || ec != std::errc{} || end != text.data() + text.size())
    throw usage_error("option " + std::string(option) + " needs a non-negative integer, got \"" +
                      echo(text) + "\"");
  if (value > admin::latest_version())
    throw usage_error("option " + std::string(option) + " is " + std::string(text) +
                      ", above this troupe's latest migration " +
                      std::to_string(admin::latest_version()));
  return value;
}

/// Refuses a malformed connection string before connecting, by the rule every part of Troupe
/// uses (troupe::validate_dsn, which never quotes a password).
void check_dsn_syntax(const std::string& dsn) {
  validate([&] { validate_dsn(dsn); });
}

/// `init`, `upgrade`: only --json.
void parse_migrate_options(argument_cursor& cur, command_line& cl, std::string_view verb_name) {
  while (!cur.done()) {
    auto arg = cur.next();
    if (!is_option(arg))
      unexpected_argument(arg, verb_name);
    auto opt = split_option(arg);
    if (is_help(opt.name)) {
      cl.what = verb::help;
      return;
    }
    if (opt.name != "--json")
      unknown_option(opt, verb_name);
    reject_value(opt);
    cl.json = true;
  }
}

/// `stats [--json] [--queue Q] [--recount]`.
void parse_stats_options(argument_cursor& cur, command_line& cl) {
  while (!cur.done()) {
    auto arg = cur.next();
    if (!is_option(arg))
      unexpected_argument(arg, "stats");
    auto opt = split_option(arg);
    if (is_help(opt.name)) {
      cl.what = verb::help;
      return;
    }
    if (opt.name == "--json") {
      reject_value(opt);
      cl.json = true;
    } else if (opt.name == "--queue") {
      cl.queue = parse_queue(cur.value_of(opt));
    } else if (opt.name == "--recount") {
      reject_value(opt);
      cl.recount = true;
    } else {
      unknown_option(opt, "stats");
    }
  }
}

/// `sql init` and `sql upgrade --from N`.
void parse_sql_options(argument_cursor& cur, command_line& cl) {
  std::optional<std::string_view> sub;
  std::optional<int> from;
  while (!cur.done()) {
    auto arg = cur.next();
    if (!is_option(arg)) {
      if (sub)
        unexpected_argument(arg, "sql " + std::string(*sub));
      if (arg != "init" && arg != "upgrade" && arg != "grants")
        throw usage_error("unknown sql verb " + echo(arg) + " (expected init, upgrade or grants)");
      sub = arg;
      continue;
    }
    auto opt = split_option(arg);
    if (is_help(opt.name)) {
      cl.what = verb::help;
      return;
    }
    if (sub == "grants" &&
        (opt.name == "--producer" || opt.name == "--node" || opt.name == "--operator")) {
      std::string role(cur.value_of(opt));
      if (role.empty() || role.size() > 63)
        throw usage_error("option " + std::string(opt.name) + " needs a role name (1 to 63 bytes)");
      (opt.name == "--producer" ? cl.roles.producer
       : opt.name == "--node"   ? cl.roles.node
                                : cl.roles.operator_role) = std::move(role);
      continue;
    }
    if (opt.name != "--from" || sub == "init" || sub == "grants")
      unknown_option(opt, sub ? "sql " + std::string(*sub) : std::string("sql"));
    from = parse_version(cur.value_of(opt), opt.name);
  }
  if (!sub)
    throw usage_error("sql needs init, upgrade or grants: troupe sql init, troupe sql upgrade "
                      "--from N, troupe sql grants --producer R --node R --operator R");
  if (*sub == "grants") {
    if (cl.roles.producer.empty() && cl.roles.node.empty() && cl.roles.operator_role.empty())
      throw usage_error("sql grants needs at least one of --producer R, --node R, --operator R");
    cl.what = verb::sql_grants;
    return;
  }
  if (*sub == "init") {
    if (from)
      throw usage_error("unknown option --from for sql init");
    cl.what = verb::sql_init;
    return;
  }
  if (!from)
    throw usage_error("sql upgrade needs --from N, the version the area is at");
  cl.what = verb::sql_upgrade;
  cl.from_version = *from;
}

/// The verbs of the operations: one positional argument (a queue or a message id, required or
/// optional) and the options each takes.
struct operation_syntax {
  std::string_view name;
  verb what;
  enum class positional { none, queue, message_id } target;
  bool target_required;
  bool filter;  // --queue, --task (and --state for cancel): instead of the target
  bool states;  // --state
  bool paging;  // --limit, --after
  bool payload; // --payload
  // --older-than and --state (finished states) of purge, --queue and --yes of flush
  bool maintenance = false;
};

constexpr operation_syntax operation_verbs[] = {
  {"pause", verb::pause, operation_syntax::positional::queue, true, false, false, false, false},
  {"resume", verb::resume, operation_syntax::positional::queue, true, false, false, false, false},
  {"queue-status", verb::queue_status, operation_syntax::positional::queue, false, false, false,
   false, false},
  {"cancel", verb::cancel, operation_syntax::positional::message_id, false, true, true, false,
   false},
  {"cancel-status", verb::cancel_status, operation_syntax::positional::message_id, true, false,
   false, false, false},
  {"failed list", verb::failed_list, operation_syntax::positional::none, false, true, false, true,
   false},
  {"failed show", verb::failed_show, operation_syntax::positional::message_id, true, false, false,
   false, true},
  {"retry", verb::retry, operation_syntax::positional::message_id, false, true, false, false,
   false},
  {"purge", verb::purge, operation_syntax::positional::none, false, false, false, false, false,
   true},
  {"recover", verb::recover, operation_syntax::positional::none, false, false, false, false, false},
  {"flush", verb::flush, operation_syntax::positional::none, false, false, false, false, false,
   true},
};

void parse_operation(argument_cursor& cur, command_line& cl, const operation_syntax& syn) {
  cl.what = syn.what;
  std::string name(syn.name);
  bool has_target = false;
  while (!cur.done()) {
    auto arg = cur.next();
    if (!is_option(arg)) {
      if (has_target || syn.target == operation_syntax::positional::none)
        unexpected_argument(arg, name);
      has_target = true;
      if (syn.target == operation_syntax::positional::queue) {
        cl.target = std::string(arg);
        validate([&] { validate_queue_name(cl.target); });
      } else {
        cl.target = parse_message_id(arg, "argument");
      }
      continue;
    }
    auto opt = split_option(arg);
    if (is_help(opt.name)) {
      cl.what = verb::help;
      return;
    }
    if (syn.filter && opt.name == "--queue") {
      cl.filter.queue = parse_queue(cur.value_of(opt));
    } else if (syn.filter && opt.name == "--task") {
      auto task = std::string(cur.value_of(opt));
      if (task.empty())
        throw usage_error("option --task needs a task name");
      cl.filter.task = std::move(task);
    } else if (syn.states && opt.name == "--state") {
      auto state = std::string(cur.value_of(opt));
      if (state != "queued" && state != "running")
        throw usage_error("option --state is \"" + echo(state) +
                          "\": it must be queued or running (repeat it for both)");
      cl.filter.states.push_back(std::move(state));
    } else if (syn.paging && opt.name == "--limit") {
      cl.limit = parse_limit(cur.value_of(opt), opt.name);
    } else if (syn.paging && opt.name == "--after") {
      cl.after = parse_message_id(cur.value_of(opt), "option --after");
    } else if (syn.payload && opt.name == "--payload") {
      reject_value(opt);
      cl.payload = true;
    } else if (syn.maintenance && syn.what == verb::purge && opt.name == "--older-than") {
      cl.older_than = std::string(cur.value_of(opt));
      if (cl.older_than.empty())
        throw usage_error("option --older-than needs an interval, such as '30 days'");
    } else if (syn.maintenance && syn.what == verb::purge && opt.name == "--state") {
      auto state = std::string(cur.value_of(opt));
      if (state != "done" && state != "failed" && state != "cancelled")
        throw usage_error("option --state is \"" + echo(state) +
                          "\": it must be done, failed or cancelled (repeat it for several)");
      cl.filter.states.push_back(std::move(state));
    } else if (syn.maintenance && syn.what == verb::flush && opt.name == "--queue") {
      cl.filter.queue = parse_queue(cur.value_of(opt));
    } else if (syn.maintenance && syn.what == verb::flush && opt.name == "--yes") {
      reject_value(opt);
      cl.yes = true;
    } else {
      unknown_option(opt, name);
    }
  }
  bool filtered = cl.filter.queue || cl.filter.task || !cl.filter.states.empty();
  if (has_target && filtered && syn.what != verb::failed_list)
    throw usage_error(name + " takes a message id or filter options (--queue, --task), not both");
  if (syn.target_required && !has_target)
    throw usage_error(
      name + " needs " +
      (syn.target == operation_syntax::positional::queue ? "a queue name" : "a message id"));
  if ((syn.what == verb::cancel || syn.what == verb::retry) && !has_target && !cl.filter.queue &&
      !cl.filter.task)
    throw usage_error(name + " needs a message id, or --queue and/or --task to choose many");
  if (syn.what == verb::flush && !cl.filter.queue)
    throw usage_error("flush needs --queue Q");
  if (syn.what == verb::flush && !cl.yes)
    throw usage_error("flush deletes every queued message of queue " + *cl.filter.queue +
                      ": add --yes to confirm");
}

} // namespace

command_line parse_command_line(const std::vector<std::string_view>& args, const char* env_dsn) {
  command_line cl;
  argument_cursor cur(args);
  std::optional<std::string> dsn;
  while (!cur.done() && is_option(cur.peek())) {
    auto opt = split_option(cur.next());
    if (is_help(opt.name)) {
      reject_value(opt);
      cl.what = verb::help;
      return cl;
    }
    if (opt.name == "--version") {
      reject_value(opt);
      cl.what = verb::version;
      return cl;
    }
    if (opt.name == "--dsn")
      dsn = std::string(cur.value_of(opt));
    else if (opt.name == "--schema")
      cl.where.schema = std::string(cur.value_of(opt));
    else if (opt.name == "--prefix")
      cl.where.prefix = std::string(cur.value_of(opt));
    else
      throw usage_error("unknown global option " + echo(opt.name) +
                        " (a verb's own options go after the verb)");
  }
  cl.dsn = dsn ? *dsn : std::string(env_dsn ? env_dsn : "");
  if (cur.done())
    throw usage_error("no verb given");
  auto verb_name = cur.next();
  if (verb_name == "help") {
    cl.what = verb::help;
  } else if (verb_name == "version") {
    cl.what = verb::version;
  } else if (verb_name == "init" || verb_name == "upgrade") {
    cl.what = verb_name == "init" ? verb::init : verb::upgrade;
    parse_migrate_options(cur, cl, verb_name);
  } else if (verb_name == "sql") {
    parse_sql_options(cur, cl);
  } else if (verb_name == "stats") {
    cl.what = verb::stats;
    parse_stats_options(cur, cl);
  } else if (verb_name == "states") {
    cl.what = verb::states;
    parse_states_options(cur, cl);
  } else if (verb_name == "history") {
    parse_history_options(cur, cl);
  } else if (verb_name == "schedule") {
    parse_schedule_options(cur, cl);
  } else if (verb_name == "scheduler") {
    parse_scheduler_options(cur, cl);
  } else if (verb_name == "exporter") {
    cl.what = verb::exporter;
    parse_exporter_options(cur, cl);
  } else if (verb_name == "dashboard") {
    cl.what = verb::dashboard;
    cl.listen_port = 9481;
    cl.poll = std::chrono::seconds(5);
    parse_dashboard_options(cur, cl);
  } else {
    std::string name(verb_name);
    if (verb_name == "failed" && !cur.done() && is_help(split_option(cur.peek()).name)) {
      cl.what = verb::help;
      return cl;
    }
    if (verb_name == "failed") {
      if (cur.done() || (cur.peek() != "list" && cur.peek() != "show"))
        throw usage_error("failed needs list or show: troupe failed list, troupe failed show ID");
      name += " " + std::string(cur.next());
    }
    const operation_syntax* syn = nullptr;
    for (const auto& o : operation_verbs)
      if (o.name == name)
        syn = &o;
    if (!syn)
      throw usage_error("unknown verb " + echo(verb_name));
    parse_operation(cur, cl, *syn);
  }
  // Before any connection, but after the verb: `troupe --schema X help` still helps.
  if (cl.what != verb::help && cl.what != verb::version)
    validate([&] { validate_area(cl.where); });
  if (cl.what != verb::help && cl.what != verb::version && cl.what != verb::sql_init &&
      cl.what != verb::sql_upgrade && cl.what != verb::sql_grants)
    check_dsn_syntax(cl.dsn);
  return cl;
}

} // namespace troupe::cli
