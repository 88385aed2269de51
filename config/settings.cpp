// Loading a worker node's settings. CAF reads the INI text and the command line; Troupe checks
// every value itself, because CAF 0.17.6 silently drops unknown INI keys and INI values of the
// wrong type for declared options. So the INI is parsed with no declared options at all (every
// value survives as written), the command line is parsed against declared Troupe flags, the
// three sources are merged into one caf::settings tree, and that tree is walked key by key.
#include "troupe/config.hpp"

#include "config/option_table.hpp"
#include "troupe/area.hpp"
#include "troupe/dsn.hpp"

#include <caf/actor_system_config.hpp>
#include <caf/config_option_adder.hpp>
#include <caf/config_option_set.hpp>
#include <caf/config_value.hpp>
#include <caf/settings.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <sstream>

namespace troupe::config {

namespace {

using namespace detail;

// -- the command line ---------------------------------------------------------------------------

constexpr std::string_view queue_selection_flag = "--queues";

/// Declares Troupe's flags next to CAF's own options and parses a command line with them. The
/// flags of a table section (`--queues.<name>.<key>=...`, `--limits.<name>.<key>=...`) are
/// declared for the names found in `args`.
class flag_parser : public caf::actor_system_config {
public:
  explicit flag_parser(const std::vector<std::string>& args) {
    for (const auto& opt : custom_options_) {
      caf_keys_.emplace(opt.category().data(), opt.category().size());
      if (opt.category() == "global") // the INI's [global] keys land at the top level
        caf_keys_.emplace(opt.long_name().data(), opt.long_name().size());
    }
    for (const auto& opt : all_options())
      if (!is_table_section(opt.section)) // those are declared per name, below
        declare(opt.section, opt.key, opt.kind, opt.description);
    caf::config_option_adder{custom_options_, "global"}.add<std::vector<std::string>>(
      queue_selection_flag.substr(2),
      "consume only these queues (a,b,c); each takes its [queues] entry or the defaults");
    for (const auto& arg : args)
      declare_table_flag(arg);
  }

  /// True when `name` is a top-level key CAF owns: one of its sections ("scheduler", "logger",
  /// "global", ...), one of its global options ("config-file", ...), or a "caf..." key.
  bool is_caf_key(std::string_view name) const {
    return caf_keys_.count(std::string(name)) > 0 || name == "caf" || name.substr(0, 4) == "caf#" ||
           name.substr(0, 4) == "caf.";
  }

  const caf::config_option* option(std::string_view qualified_name) const {
    return custom_options_.qualified_name_lookup(qualified_name);
  }

  /// What --dump-config prints: CAF's view with Troupe's sections as the loader merges them.
  caf::settings dump_content() const override;

  // Inputs of dump_content, set before parse().
  const caf::settings* file_tree = nullptr;
  const char* env_dsn = nullptr;

private:
  /// Declares `--queues.<name>.<key>` or `--limits.<name>.<key>` when `arg` is one.
  void declare_table_flag(std::string_view arg) {
    for (auto section : {queues_section, limits_section}) {
      auto prefix = fmt::format("--{}.", section);
      if (arg.substr(0, prefix.size()) != prefix)
        continue;
      auto name = arg.substr(2, arg.find('=') - 2); // <section>.<name>.<key>
      auto dot = name.rfind('.');
      auto opt = find_option(section, name.substr(dot + 1));
      if (dot <= section.size() || !opt)
        return; // left undeclared: CAF reports the unknown flag
      if (!custom_options_.qualified_name_lookup(name))
        declare(name.substr(0, dot), opt->key, opt->kind, opt->description);
    }
  }

  void declare(std::string_view category, std::string_view key, value_kind kind,
               std::string_view description) {
    caf::config_option_adder group{custom_options_, category};
    if (kind == value_kind::integer)
      group.add<caf::config_value::integer>(key, description);
    else // durations and booleans too: CAF's timespan flags refuse plain milliseconds
      group.add<std::string>(key, description);
  }

  std::set<std::string> caf_keys_;
};

/// Duration flags arrive as text; parse them as INI values are parsed ("30s" becomes a timespan,
/// "500" an integer). Text that parses as neither stays text and is reported by assign().
void parse_duration_flag(caf::config_value& value, std::string_view key) {
  auto text = caf::get_if<std::string>(&value);
  if (!text)
    return;
  if (auto big = find_overflowing_duration(*text))
    fail(fmt::format("{}: {} is too large for a duration", key, big->spelling));
  auto parsed = caf::config_value::parse(*text);
  if (parsed && (caf::holds_alternative<caf::config_value::integer>(*parsed) ||
                 caf::holds_alternative<caf::timespan>(*parsed)))
    value = std::move(*parsed);
}

/// Boolean flags arrive as text too ("true", "false"); other text is reported by assign().
void parse_boolean_flag(caf::config_value& value) {
  if (auto text = caf::get_if<std::string>(&value); text && (*text == "true" || *text == "false"))
    value = *text == "true";
}

/// Does so for the duration flags in one section of the flags' tree ([queues] and [limits] nest
/// by name).
void parse_duration_flags(std::string_view section, caf::settings& dict) {
  for (auto& [key, value] : dict) {
    if (auto child = caf::get_if<caf::settings>(&value); child && is_table_section(section))
      parse_duration_flags(section, *child);
    else if (auto opt = find_option(section, key); opt && opt->kind == value_kind::duration)
      parse_duration_flag(value, fmt::format("{}.{}", section, key));
    else if (opt && opt->kind == value_kind::boolean)
      parse_boolean_flag(value);
  }
}

/// Writes `top` over `base` key by key, so a flag replaces one value and keeps the file's others.
void overlay(caf::settings& base, const caf::settings& top) {
  for (const auto& [key, value] : top) {
    auto& slot = base[key];
    if (auto sub = caf::get_if<caf::settings>(&value)) {
      if (!caf::holds_alternative<caf::settings>(slot))
        slot = caf::settings{};
      overlay(caf::get<caf::settings>(slot), *sub);
    } else {
      slot = value;
    }
  }
}

/// The file's tree, then TROUPE_DSN, then the flags: the one tree the loader reads.
caf::settings merge_sources(const caf::settings& file, const char* env_dsn,
                            const caf::settings& flags) {
  caf::settings merged = file;
  if (env_dsn != nullptr && *env_dsn != '\0') {
    if (merged.find("database") == merged.end())
      merged["database"] = caf::settings{};
    // A [database] that is not a section stays as it is, for read_settings() to report.
    if (auto database = caf::get_if<caf::settings>(&merged["database"]))
      (*database)["dsn"] = std::string(env_dsn);
  }
  for (const auto& [name, value] : flags) {
    auto given = caf::get_if<caf::settings>(&value);
    if (!given || !is_troupe_section(name))
      continue;
    auto section = *given;
    parse_duration_flags(name, section);
    auto& slot = merged[name];
    if (!caf::holds_alternative<caf::settings>(slot))
      slot = caf::settings{};
    overlay(caf::get<caf::settings>(slot), section);
  }
  return merged;
}

caf::settings flag_parser::dump_content() const {
  auto result = actor_system_config::dump_content();
  auto merged = merge_sources(file_tree ? *file_tree : caf::settings{}, env_dsn, content);
  for (const auto& [name, value] : merged)
    if (is_troupe_section(name))
      result[name] = value;
  if (auto db = caf::get_if<caf::settings>(&result["database"]))
    if (auto dsn = caf::get_if<std::string>(db, "dsn"))
      (*db)["dsn"] = redact_dsn(*dsn);
  return result;
}

/// A parser error code as words: "unexpected character".
std::string readable(caf::pec code) {
  auto text = caf::to_string(code);
  std::replace(text.begin(), text.end(), '_', ' ');
  return text;
}

/// The "argument" CAF names in a parser error's context, if any.
std::string failed_argument(const caf::error& err) {
  const auto& ctx = err.context();
  if (ctx.size() == 1 && ctx.match_element<caf::settings>(0))
    return caf::get_or(ctx.get_as<caf::settings>(0), "argument", std::string{});
  if (ctx.size() == 1 && ctx.match_element<std::string>(0))
    return ctx.get_as<std::string>(0);
  return {};
}

std::string describe_flag_error(const caf::error& err) {
  auto argument = failed_argument(err);
  auto eq = argument.find('=');
  auto flag = argument.substr(0, eq);
  auto value = eq == std::string::npos ? std::string{} : argument.substr(eq + 1);
  auto key = flag.substr(0, 2) == "--" ? flag.substr(2) : flag;
  if (key == "database.dsn")
    value = "***"; // a password could be anywhere in it
  if (err.category() != caf::atom("parser"))
    return fmt::format("cannot read the command line: {}", without_password(caf::to_string(err)));
  switch (static_cast<caf::pec>(err.code())) {
  case caf::pec::not_an_option:
    return fmt::format("unknown flag \"{}\" (flags are --section.key=value for the keys of "
                       "troupe.ini; --long-help lists them)",
                       flag);
  case caf::pec::missing_argument:
    return fmt::format("flag {} needs a value: write {}=VALUE (an empty string is {}=\"\")", flag,
                       flag, flag);
  default:
    break;
  }
  auto reason = readable(static_cast<caf::pec>(err.code()));
  // A Troupe flag: "section.key", or "queues.<name>.key" / "limits.<name>.key" of a table.
  auto first_dot = key.find('.');
  auto last_dot = key.rfind('.');
  if (first_dot != std::string::npos) {
    auto section = std::string_view{key}.substr(0, first_dot);
    auto opt = find_option(section, std::string_view{key}.substr(last_dot + 1));
    if (opt && is_table_section(section) == (first_dot != last_dot))
      return fmt::format("{}: expected {}, got \"{}\" (flag {}: {})", key, expected_text(opt->kind),
                         value, flag, reason);
  }
  return fmt::format("flag {}: invalid value \"{}\" ({})", flag, value, reason);
}

/// Takes every `--queues=a,b` out of `args` (CAF would store the list where the [queues] table
/// of the per-queue flags goes) and returns the value of the last one.
std::optional<std::string> take_queue_selection(std::vector<std::string>& args) {
  std::optional<std::string> last;
  auto prefix = fmt::format("{}=", queue_selection_flag);
  for (auto i = args.begin(); i != args.end();) {
    if (*i == queue_selection_flag || i->substr(0, prefix.size()) == prefix) {
      last = i->size() > prefix.size() ? i->substr(prefix.size()) : std::string{};
      i = args.erase(i);
    } else {
      ++i;
    }
  }
  return last;
}

std::vector<std::string> parse_queue_selection(const flag_parser& flags, const std::string& text) {
  if (text.empty())
    fail(fmt::format("flag {} needs a value: write {}=a,b", queue_selection_flag,
                     queue_selection_flag));
  auto parsed = flags.option(fmt::format("global.{}", queue_selection_flag.substr(2)))->parse(text);
  auto list = parsed ? caf::get_if<caf::config_value::list>(&*parsed) : nullptr;
  if (!list)
    fail(fmt::format("flag {}: expected a list of queue names such as a,b, got \"{}\"",
                     queue_selection_flag, text));
  std::vector<std::string> names;
  for (const auto& item : *list) {
    auto name = caf::get_if<std::string>(&item);
    if (!name)
      fail(fmt::format("flag {}: expected queue names, got {}", queue_selection_flag,
                       caf::to_string(item)));
    with_key(queue_selection_flag, [&] { validate_queue_name(*name); });
    names.push_back(*name);
  }
  return names;
}

// -- the INI file -------------------------------------------------------------------------------

constexpr const char* default_config_file = "troupe.ini";

/// Where a `{` of `text` is never closed (outside strings and comments), as "LINE:COLUMN": CAF's
/// parser drops such a table, and the section it is in, without an error.
std::optional<std::string> unclosed_brace(std::string_view text) {
  std::vector<std::pair<int, int>> open; // line and column of each unclosed '{'
  int line = 1;
  int column = 0;
  bool in_string = false;
  bool in_comment = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    ++column;
    if (c == '\n') {
      ++line;
      column = 0;
      in_comment = false;
      continue;
    }
    if (in_comment)
      continue;
    if (in_string) {
      if (c == '\\')
        ++i, ++column;
      else if (c == '"')
        in_string = false;
      continue;
    }
    if (c == '"')
      in_string = true;
    else if (c == ';')
      in_comment = true;
    else if (c == '{')
      open.emplace_back(line, column);
    else if (c == '}' && !open.empty())
      open.pop_back();
  }
  if (open.empty())
    return std::nullopt;
  return fmt::format("{}:{}", open.front().first, open.front().second);
}

/// Parses INI text with no declared options, so nothing is dropped. Returns an error text.
std::optional<std::string> parse_ini(const std::string& text, const std::string& source,
                                     caf::settings& tree) {
  if (auto where = unclosed_brace(text))
    return fmt::format("{}:{}: invalid INI syntax (this '{{' is never closed by a '}}')", source,
                       *where);
  if (auto big = find_overflowing_duration(text)) {
    auto before = std::string_view{text}.substr(0, big->offset);
    auto line = std::count(before.begin(), before.end(), '\n') + 1;
    auto line_start = before.rfind('\n');
    auto column = big->offset - (line_start == std::string_view::npos ? 0 : line_start + 1) + 1;
    return fmt::format("{}:{}:{}: {} is too large for a duration (durations have ranges: "
                       "--long-help lists them)",
                       source, line, column, big->spelling);
  }
  std::istringstream in{text};
  caf::config_option_set no_options;
  auto err = caf::actor_system_config::parse_config(in, no_options, tree);
  if (!err)
    return std::nullopt;
  std::string where = source;
  const auto& ctx = err.context();
  if (ctx.size() == 1 && ctx.match_element<caf::settings>(0)) {
    const auto& pos = ctx.get_as<caf::settings>(0);
    where = fmt::format("{}:{}:{}", source, caf::get_or(pos, "line", caf::config_value::integer{0}),
                        caf::get_or(pos, "column", caf::config_value::integer{0}));
  }
  auto what = err.category() == caf::atom("parser") ? readable(static_cast<caf::pec>(err.code()))
                                                    : without_password(caf::to_string(err));
  return fmt::format("{}: invalid INI syntax ({}); strings need double quotes, comments start "
                     "with ';', durations are written 30s or 500ms",
                     where, what);
}

/// The INI source: the given text, the --config-file, or ./troupe.ini when it exists.
struct ini_source {
  std::string text;
  /// How errors name it.
  std::string label = default_config_file;
  /// The path read; empty when no file was.
  std::string path;
};

std::optional<std::string> config_file_flag(const std::vector<std::string>& args) {
  std::optional<std::string> path;
  for (const auto& arg : args) {
    if (arg == "--config-file")
      fail("flag --config-file needs a value: write --config-file=PATH");
    if (arg.rfind("--config-file=", 0) == 0)
      path = arg.substr(std::string_view{"--config-file="}.size());
  }
  if (path && path->empty())
    fail("flag --config-file needs a value: write --config-file=PATH");
  return path;
}

ini_source read_config_file(const std::vector<std::string>& args) {
  ini_source src;
  auto explicit_path = config_file_flag(args);
  auto path = explicit_path.value_or(default_config_file);
  std::error_code dir_ec;
  if (std::filesystem::is_directory(path, dir_ec))
    fail(fmt::format("config file \"{}\"{} is a directory, not a file", path,
                     explicit_path ? " (given by --config-file)" : ""));
  std::ifstream file{path};
  if (!file) {
    std::error_code ec;
    if (explicit_path || std::filesystem::exists(path, ec))
      fail(fmt::format("cannot open config file \"{}\"{}", path,
                       explicit_path ? " (given by --config-file)" : ""));
    return src;
  }
  std::ostringstream text;
  text << file.rdbuf();
  src.text = text.str();
  src.label = path;
  src.path = path;
  return src;
}

// -- putting it together ------------------------------------------------------------------------

/// `ini` is the given text, or std::nullopt to read --config-file or ./troupe.ini.
settings load_impl(std::vector<std::string> args, const std::optional<std::string>& ini,
                   const char* env_dsn) {
  flag_parser flags{args};
  auto selection_text = take_queue_selection(args);
  ini_source src;
  if (ini) {
    if (config_file_flag(args))
      fail("flag --config-file cannot be used here: the INI text is given");
    src.text = *ini;
  } else {
    src = read_config_file(args);
  }
  caf::settings file_tree;
  auto file_error = parse_ini(src.text, src.label, file_tree);
  flags.file_tree = &file_tree;
  flags.env_dsn = env_dsn;
  // The INI was read above, without CAF's option filter; CAF parses only the flags.
  std::istringstream no_ini;
  if (auto err = flags.parse(args, no_ini))
    fail(describe_flag_error(err));
  if (flags.cli_helptext_printed) {
    settings out;
    out.help_printed = true;
    return out;
  }
  if (file_error)
    fail(*file_error);
  if (!flags.remainder.empty())
    fail(fmt::format("unexpected argument \"{}\" (flags are --section.key=value)",
                     without_password(flags.remainder.front())));
  std::optional<std::vector<std::string>> selection;
  if (selection_text)
    selection = parse_queue_selection(flags, *selection_text);
  auto merged = merge_sources(file_tree, env_dsn, flags.content);
  auto is_caf_key = [&flags](std::string_view name) { return flags.is_caf_key(name); };
  auto out = read_settings(merged, is_caf_key, src.label, selection);
  out.config_file = src.path;
  return out;
}

} // namespace

settings load(int argc, char** argv) {
  std::vector<std::string> args;
  for (int i = 1; i < argc; ++i)
    args.emplace_back(argv[i]);
  return load_impl(std::move(args), std::nullopt, std::getenv("TROUPE_DSN"));
}

settings load_from_string(const std::string& ini_text, const std::vector<std::string>& flags,
                          const char* env_dsn) {
  return load_impl(flags, ini_text, env_dsn);
}

} // namespace troupe::config
