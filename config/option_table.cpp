#include "config/option_table.hpp"

#include "troupe/area.hpp"
#include "troupe/coordination.hpp"
#include "troupe/dsn.hpp"
#include "troupe/error.hpp"

#include <caf/config_value.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <limits>
#include <set>
#include <variant>

namespace troupe::config {

namespace detail {

using std::chrono::milliseconds;

value_kind kind_of(const field_ref& field) {
  if (std::holds_alternative<std::string*>(field))
    return value_kind::string;
  if (std::holds_alternative<bool*>(field))
    return value_kind::boolean;
  return std::holds_alternative<std::int32_t*>(field) ? value_kind::integer : value_kind::duration;
}

std::string show(const caf::config_value& value, std::string_view key) {
  if (key == "database.dsn")
    return fmt::format("a value of type {}", value.type_name());
  return caf::to_string(value);
}

void assign(const field_ref& field, const caf::config_value& value, const std::string& key) {
  if (auto out = std::get_if<std::string*>(&field)) {
    auto s = caf::get_if<std::string>(&value);
    if (!s)
      fail(fmt::format("{}: expected a string in double quotes, got {}", key, show(value, key)));
    **out = *s;
  } else if (auto out = std::get_if<std::int32_t*>(&field)) {
    auto i = caf::get_if<caf::config_value::integer>(&value);
    if (!i)
      fail(fmt::format("{}: expected an integer, got {}", key, show(value, key)));
    if (*i < std::numeric_limits<std::int32_t>::min() ||
        *i > std::numeric_limits<std::int32_t>::max())
      fail(fmt::format("{}: {} is out of range", key, *i));
    **out = static_cast<std::int32_t>(*i);
  } else if (auto out = std::get_if<bool*>(&field)) {
    auto b = caf::get_if<bool>(&value);
    if (!b)
      fail(fmt::format("{}: expected true or false, got {}", key, show(value, key)));
    **out = *b;
  } else {
    auto* d = std::get<milliseconds*>(field);
    if (auto i = caf::get_if<caf::config_value::integer>(&value)) {
      *d = milliseconds{*i};
    } else if (auto t = caf::get_if<caf::timespan>(&value)) {
      if (t->count() < 0)
        fail(fmt::format("{}: {} is negative or too large for a duration", key, show(value, key)));
      if (t->count() % 1'000'000 != 0)
        fail(fmt::format("{}: {} is not a whole number of milliseconds", key, show(value, key)));
      *d = std::chrono::duration_cast<milliseconds>(*t);
    } else {
      fail(fmt::format("{}: expected {}, got {}", key, expected_text(value_kind::duration),
                       show(value, key)));
    }
  }
}

namespace {

// -- the tables ---------------------------------------------------------------------------------

/// One option of [database], [area], [node] or [logging].
struct section_option {
  std::string_view section;
  std::string_view key;
  std::string_view description;
  field_ref (*field)(settings&);
};

/// One key of a [queues] table.
struct queue_option {
  std::string_view key;
  std::string_view description;
  field_ref (*field)(queue_options&);
};

// In the order the reference file lists them. Defaults come from the structs themselves.
constexpr section_option section_options[] = {
  {"database", "dsn",
   "libpq conninfo or URI; empty = libpq's PG* environment variables; TROUPE_DSN overrides it",
   [](settings& s) -> field_ref { return &s.node.dsn; }},
  {"area", "schema", "schema holding this application's Troupe tables",
   [](settings& s) -> field_ref { return &s.node.area.schema; }},
  {"area", "prefix", "prefix of every Troupe table name in the schema (may be empty)",
   [](settings& s) -> field_ref { return &s.node.area.prefix; }},
  {"node", "name", "this node's name in the nodes registry and the logs; empty = host:pid",
   [](settings& s) -> field_ref { return &s.node.name; }},
  {"node", "storage-connections",
   "database connections for claims and outcomes, besides the listener's (1 to 64); the "
   "first half takes claims, the rest writes",
   [](settings& s) -> field_ref { return &s.node.storage_connections; }},
  {"node", "scheduler-threads",
   "threads of the standalone node's CAF scheduler (1 to 64); tasks and database calls have "
   "threads of their own",
   [](settings& s) -> field_ref { return &s.node.scheduler_threads; }},
  {"node", "shutdown-grace",
   "duration: how long running tasks may finish after a stop is asked for (0 to 24h)",
   [](settings& s) -> field_ref { return &s.node.shutdown_grace; }},
  {"node", "janitor-interval", "duration: how often the janitor looks for dead nodes (100ms to 1h)",
   [](settings& s) -> field_ref { return &s.node.janitor_interval; }},
  {"node", "retention-done",
   "duration: how long done rows are kept once finished (0 keeps them; 1min to 87600h)",
   [](settings& s) -> field_ref { return &s.node.retention_done; }},
  {"node", "retention-failed",
   "duration: how long failed rows are kept once finished (0 keeps them; 1min to 87600h)",
   [](settings& s) -> field_ref { return &s.node.retention_failed; }},
  {"node", "retention-cancelled",
   "duration: how long cancelled rows are kept (0 keeps them; 1min to 87600h)",
   [](settings& s) -> field_ref { return &s.node.retention_cancelled; }},
  {"node", "time-limit-grace",
   "duration: how long past its time limit an attempt may run before it is abandoned (0 to "
   "24h)",
   [](settings& s) -> field_ref { return &s.node.time_limit_grace; }},
  {"node", "dead-node-grace",
   "duration: how long a node's liveness lock must stay free before its messages are "
   "recovered (2s to 24h)",
   [](settings& s) -> field_ref { return &s.node.dead_node_grace; }},
  {"node", "completion-flush-interval",
   "duration: longest wait before finished outcomes are written (0 to 10s)",
   [](settings& s) -> field_ref { return &s.node.completion_flush_interval; }},
  {"node", "statement-timeout",
   "duration: longest a database statement of the node may run (1s to 25s; 0 = the server's)",
   [](settings& s) -> field_ref { return &s.node.statement_timeout; }},
  {"node", "completion-batch-size", "outcomes written in one statement at most (1 to 10000)",
   [](settings& s) -> field_ref { return &s.node.completion_batch_size; }},
  {"node", "vacuum-dead-rows",
   "the janitor vacuums the queue table past this many dead row versions plus 2 % of its live "
   "rows (0 never)",
   [](settings& s) -> field_ref { return &s.node.vacuum_dead_rows; }},
  {"schedules", "enabled",
   "whether this node runs a scheduler, publishing the area's due schedules (docs/scheduler.md)",
   [](settings& s) -> field_ref { return &s.node.scheduler.enabled; }},
  {"schedules", "poll", "duration: how often the scheduler looks for due schedules (10ms to 1h)",
   [](settings& s) -> field_ref { return &s.node.scheduler.poll; }},
  {"schedules", "batch", "schedules one tick of the scheduler takes at most (1 to 1000)",
   [](settings& s) -> field_ref { return &s.node.scheduler.batch; }},
  {"metrics", "enabled",
   "whether this node serves Prometheus metrics on bind:port (docs/metrics.md)",
   [](settings& s) -> field_ref { return &s.node.metrics.enabled; }},
  {"metrics", "bind",
   "the address its metrics endpoint listens on (an IP address or host name; localhost by "
   "default)",
   [](settings& s) -> field_ref { return &s.node.metrics.bind; }},
  {"metrics", "port", "the port of its metrics endpoint (0 to 65535; 0 = any free port)",
   [](settings& s) -> field_ref { return &s.node.metrics.port; }},
  {"logging", "level", "trace, debug, info, warn, error, critical or off",
   [](settings& s) -> field_ref { return &s.logging.level; }},
  {"logging", "format", "log line format; only \"text\" so far",
   [](settings& s) -> field_ref { return &s.logging.format; }},
};

constexpr queue_option queue_options_table[] = {
  {"concurrency", "tasks of this queue running at once, one thread each (1 to 1024)",
   [](queue_options& q) -> field_ref { return &q.concurrency; }},
  {"prefetch", "claimed messages held ready beyond the running ones (0 to 65535)",
   [](queue_options& q) -> field_ref { return &q.prefetch; }},
  {"poll-interval", "duration: the claim poll that backs up notifications (10ms to 1h)",
   [](queue_options& q) -> field_ref { return &q.poll_interval; }},
};

constexpr std::string_view log_levels[] = {"trace", "debug",    "info", "warn",
                                           "error", "critical", "off"};

const section_option* find_section_option(std::string_view section, std::string_view key) {
  for (const auto& opt : section_options)
    if (opt.section == section && opt.key == key)
      return &opt;
  return nullptr;
}

const queue_option* find_queue_option(std::string_view key) {
  for (const auto& opt : queue_options_table)
    if (opt.key == key)
      return &opt;
  return nullptr;
}

// -- reading values -----------------------------------------------------------------------------

/// Reads [database], [area], [node] or [logging]: every key must be one of the section's options.
void read_section(std::string_view section, const caf::settings& dict, const std::string& source,
                  settings& out) {
  for (const auto& [key, value] : dict) {
    auto opt = find_section_option(section, key);
    if (!opt)
      fail(fmt::format("unknown key \"{}.{}\" in {}", section, key, source));
    assign(opt->field(out), value, fmt::format("{}.{}", section, key));
  }
}

/// Reads one [queues] entry. CAF's INI syntax cannot write a dotted key, so a queue named
/// "reports.daily" is written `[queues.reports]` + `daily={...}`: a table inside an entry that is
/// not one of the queue options is a further name segment. An entry holding only such tables is
/// not a queue itself.
void read_queue(const std::string& name, const caf::settings& dict, const std::string& source,
                std::vector<queue_options>& out) {
  queue_options q;
  q.name = name;
  bool has_options = false;
  bool has_children = false;
  for (const auto& [key, value] : dict) {
    auto path = fmt::format("{}.{}.{}", queues_section, name, key);
    if (auto opt = find_queue_option(key)) {
      assign(opt->field(q), value, path);
      has_options = true;
    } else if (auto child = caf::get_if<caf::settings>(&value)) {
      read_queue(fmt::format("{}.{}", name, key), *child, source, out);
      has_children = true;
    } else {
      fail(fmt::format("unknown key \"{}\" in {}", path, source));
    }
  }
  if (has_options || !has_children) {
    with_key(queues_section, [&] { validate_queue_name(q.name); });
    out.push_back(std::move(q));
  }
}

std::vector<queue_options> read_queues(const caf::settings& dict, const std::string& source) {
  std::vector<queue_options> out;
  for (const auto& [name, value] : dict) {
    auto entry = caf::get_if<caf::settings>(&value);
    if (!entry)
      fail(fmt::format("{}.{}: expected a table such as {{concurrency=2}}, got {}", queues_section,
                       name, show(value, "")));
    read_queue(name, *entry, source, out);
  }
  return out;
}

/// The queues the node consumes: the --queues list when given (each name with its configured
/// entry, or the defaults), else every configured entry, else one queue "default".
std::vector<queue_options>
consumed_queues(std::optional<std::vector<queue_options>> configured,
                const std::optional<std::vector<std::string>>& selection) {
  auto queues = configured.value_or(std::vector<queue_options>{queue_options{}});
  if (!selection)
    return queues;
  std::vector<queue_options> chosen;
  for (const auto& name : *selection) {
    auto same = [&](const queue_options& q) { return q.name == name; };
    auto i = std::find_if(queues.begin(), queues.end(), same);
    queue_options fresh;
    fresh.name = name;
    chosen.push_back(i != queues.end() ? *i : fresh);
  }
  return chosen;
}

void validate_logging(const logging_settings& logging) {
  if (std::find(std::begin(log_levels), std::end(log_levels), logging.level) ==
      std::end(log_levels))
    fail(fmt::format("logging.level: \"{}\" is not one of {}", logging.level,
                     fmt::join(log_levels, ", ")));
  if (logging.format != "text")
    fail(fmt::format("logging.format: \"{}\" is not supported (only \"text\")", logging.format));
}

// -- the reference file -------------------------------------------------------------------------

std::string format_duration(milliseconds d) {
  auto ms = d.count();
  if (ms != 0 && ms % 60000 == 0)
    return fmt::format("{}min", ms / 60000);
  if (ms != 0 && ms % 1000 == 0)
    return fmt::format("{}s", ms / 1000);
  return fmt::format("{}ms", ms);
}

std::string format_value(const field_ref& field) {
  if (auto s = std::get_if<std::string*>(&field))
    return fmt::format("\"{}\"", **s);
  if (auto i = std::get_if<std::int32_t*>(&field))
    return std::to_string(**i);
  if (auto b = std::get_if<bool*>(&field))
    return **b ? "true" : "false";
  return format_duration(*std::get<milliseconds*>(field));
}

std::string queues_reference() {
  auto out = fmt::format("\n[{}]\n", queues_section);
  out += "; one entry per queue this node consumes: name={key=value, ...}; omitted keys take\n"
         "; the defaults below. Without a [queues] section the node consumes \"default\".\n";
  queue_options q;
  std::string entry;
  for (const auto& opt : queue_options_table) {
    out += fmt::format(";   {}: {}\n", opt.key, opt.description);
    entry += fmt::format("{}{}={}", entry.empty() ? "" : ", ", opt.key, format_value(opt.field(q)));
  }
  return out + fmt::format("{}={{{}}}\n", q.name, entry);
}

} // namespace

const std::vector<option_info>& all_options() {
  static const std::vector<option_info> options = [] {
    std::vector<option_info> out;
    settings s;
    for (const auto& opt : section_options)
      out.push_back({opt.section, opt.key, kind_of(opt.field(s)), opt.description});
    queue_options q;
    for (const auto& opt : queue_options_table)
      out.push_back({queues_section, opt.key, kind_of(opt.field(q)), opt.description});
    append_limit_options(out);
    return out;
  }();
  return options;
}

const option_info* find_option(std::string_view section, std::string_view key) {
  for (const auto& opt : all_options())
    if (opt.section == section && opt.key == key)
      return &opt;
  return nullptr;
}

bool is_troupe_section(std::string_view name) {
  for (const auto& opt : all_options())
    if (opt.section == name)
      return true;
  return false;
}

std::string_view expected_text(value_kind kind) {
  switch (kind) {
  case value_kind::string:
    return "a string";
  case value_kind::integer:
    return "an integer";
  case value_kind::boolean:
    return "true or false";
  default:
    return "a duration such as 30s, 500ms or 2min (or an integer of milliseconds)";
  }
}

void fail(const std::string& what) {
  throw error(errc::invalid_argument, what);
}

void with_key(std::string_view key, const std::function<void()>& check) {
  try {
    check();
  } catch (const error& e) {
    fail(fmt::format("{}: {}", key, e.what()));
  }
}

std::string without_password(const std::string& text) {
  // libpq takes a password as `password=...` or inside a URI.
  auto may_hold_one =
    text.find("password") != std::string::npos || text.find("://") != std::string::npos;
  return may_hold_one ? redact_secrets(text) : text;
}

settings read_settings(const caf::settings& tree,
                       const std::function<bool(std::string_view)>& is_caf_key,
                       const std::string& source,
                       const std::optional<std::vector<std::string>>& selection) {
  settings out;
  std::optional<std::vector<queue_options>> configured;
  for (const auto& [name, value] : tree) {
    if (is_caf_key(name))
      continue; // CAF's own settings pass through untouched
    auto dict = caf::get_if<caf::settings>(&value);
    if (!is_troupe_section(name))
      fail(dict ? fmt::format("unknown section \"[{}]\" in {}", name, source)
                : fmt::format("unknown key \"{}\" in {}", name, source));
    if (!dict)
      fail(fmt::format("{}: expected a section [{}], got a value", name, name));
    if (name == queues_section)
      configured = read_queues(*dict, source);
    else if (name == limits_section)
      out.node.limits = read_limits(*dict, source);
    else
      read_section(name, *dict, source, out);
  }
  out.node.queues = consumed_queues(std::move(configured), selection);
  with_key("area.schema", [&] { validate_schema(out.node.area.schema); });
  with_key("area.prefix", [&] { validate_prefix(out.node.area.prefix); });
  troupe::validate(out.node);
  validate_logging(out.logging);
  return out;
}

} // namespace detail

std::string default_config_text() {
  using namespace detail;
  settings defaults;
  std::string out = "; troupe.ini: the settings of one Troupe worker node, every option at its "
                    "default.\n"
                    "; Precedence: this file < TROUPE_DSN (database.dsn only) < command-line "
                    "flags (--section.key=value).\n"
                    "; CAF INI syntax: strings in double quotes, comments start with ';', "
                    "durations are written\n"
                    "; 30s, 500ms or 2min (an integer means milliseconds). Unknown keys are "
                    "errors.\n";
  std::string_view section;
  for (const auto& opt : section_options) {
    if (opt.section == "logging" && section != "logging")
      out += queues_reference() + limits_reference(); // as in docs/configuration.md
    if (opt.section != section) {
      section = opt.section;
      out += fmt::format("\n[{}]\n", section);
    }
    out +=
      fmt::format("; {}\n{}={}\n", opt.description, opt.key, format_value(opt.field(defaults)));
  }
  return out;
}

} // namespace troupe::config
