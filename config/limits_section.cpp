// The [limits] section: limiters declared by key (`payments={kind="concurrent", limit=5}`),
// read into troupe::limit values with errors that name the key, and its part of the reference
// file. docs/configuration.md describes it.
#include "config/option_table.hpp"

#include "troupe/coordination.hpp"

#include <caf/config_value.hpp>
#include <fmt/format.h>

#include <set>

namespace troupe::config::detail {

namespace {

using std::chrono::milliseconds;

/// A [limits] entry as written; read_limit checks it and makes a troupe::limit of it.
struct limit_entry {
  std::string kind = "concurrent";
  std::int32_t limit = 0;
  milliseconds window{0};
};

/// One key of a [limits] table.
struct limit_option {
  std::string_view key;
  std::string_view description;
  field_ref (*field)(limit_entry&);
};

constexpr limit_option limit_options_table[] = {
  {"kind",
   "\"concurrent\" (at most limit at once), \"bucket\" (limit per fixed window) or "
   "\"window\" (limit in any sliding window); default \"concurrent\"",
   [](limit_entry& l) -> field_ref { return &l.kind; }},
  {"limit", "how many at once, or per window (1 to 1000000000); required",
   [](limit_entry& l) -> field_ref { return &l.limit; }},
  {"window",
   "duration: the window of a bucket or window limiter (1ms to 8760h); required for those, "
   "refused for a concurrent one",
   [](limit_entry& l) -> field_ref { return &l.window; }},
};

const limit_option* find_limit_option(std::string_view key) {
  for (const auto& opt : limit_options_table)
    if (opt.key == key)
      return &opt;
  return nullptr;
}

} // namespace

/// Reads one [limits] entry (its name is the limiter's key). As in [queues], a table inside an
/// entry that is not one of the limiter's keys continues the name ("stripe.charges").
void read_limit(const std::string& name, const caf::settings& dict, const std::string& source,
                std::vector<limit>& out) {
  limit_entry entry;
  std::set<std::string_view> given;
  bool has_children = false;
  for (const auto& [key, value] : dict) {
    auto path = fmt::format("{}.{}.{}", limits_section, name, key);
    if (auto opt = find_limit_option(key)) {
      assign(opt->field(entry), value, path);
      given.insert(opt->key);
    } else if (auto child = caf::get_if<caf::settings>(&value)) {
      read_limit(fmt::format("{}.{}", name, key), *child, source, out);
      has_children = true;
    } else {
      fail(fmt::format("unknown key \"{}\" in {} (a limiter takes kind, limit and window)", path,
                       source));
    }
  }
  if (given.empty() && has_children)
    return;
  auto path = fmt::format("{}.{}", limits_section, name);
  limit l;
  l.key = name;
  with_key(path + ".kind", [&] { l.kind = parse_limit_kind(entry.kind, name); });
  if (!given.count("limit"))
    fail(fmt::format("{}.limit is required: how many at once, or per window", path));
  l.capacity = entry.limit;
  if (l.kind == limit_kind::concurrent && given.count("window"))
    fail(fmt::format("{}.window: a concurrent limiter has no window (it holds at most limit at "
                     "once); use kind=\"bucket\" or kind=\"window\" for a rate",
                     path));
  if (l.kind != limit_kind::concurrent && !given.count("window"))
    fail(fmt::format("{}.window is required for a {} limiter (limit per window)", path,
                     to_string(l.kind)));
  l.span = l.kind == limit_kind::concurrent ? milliseconds{0} : entry.window;
  with_key(path, [&] { validate_limit(l); });
  out.push_back(std::move(l));
}

std::vector<limit> read_limits(const caf::settings& dict, const std::string& source) {
  std::vector<limit> out;
  for (const auto& [name, value] : dict) {
    auto entry = caf::get_if<caf::settings>(&value);
    if (!entry)
      fail(fmt::format("{}.{}: expected a table such as {{kind=\"concurrent\", limit=5}}, got {}",
                       limits_section, name, show(value, "")));
    read_limit(name, *entry, source, out);
  }
  return out;
}

std::string limits_reference() {
  auto out = fmt::format("\n[{}]\n", limits_section);
  out += "; limiters this node's tasks take by key: limit_guard(ctx, \"payments\"). None by "
         "default.\n"
         "; key={kind=..., limit=N, window=D}; the key is the limiter's in the whole area.\n";
  for (const auto& opt : limit_options_table)
    out += fmt::format(";   {}: {}\n", opt.key, opt.description);
  return out + "; payments={kind=\"concurrent\", limit=5}\n"
               "; partner-api={kind=\"window\", limit=100, window=1min}\n";
}

void append_limit_options(std::vector<option_info>& out) {
  limit_entry l;
  for (const auto& opt : limit_options_table)
    out.push_back({limits_section, opt.key, kind_of(opt.field(l)), opt.description});
}

} // namespace troupe::config::detail
