#include "storage/statements.hpp"

#include "storage/embedded_sql.hpp"
#include "storage/migrations.hpp"
#include "storage/naming.hpp"
#include "troupe/error.hpp"

#include <fmt/format.h>

namespace troupe::storage {

std::string render_sql(std::string_view text, const area& a) {
  std::string out;
  out.reserve(text.size() + 64);
  std::size_t pos = 0;
  while (pos < text.size()) {
    auto open = text.find("{{", pos);
    if (open == std::string_view::npos) {
      out.append(text.substr(pos));
      break;
    }
    auto close = text.find("}}", open);
    if (close == std::string_view::npos)
      throw error(errc::bug, "unterminated placeholder in SQL template");
    out.append(text.substr(pos, open - pos));
    auto key = text.substr(open + 2, close - open - 2);
    if (key == "schema") {
      out += quote_identifier(a.schema);
    } else if (key.starts_with("t:")) {
      out += quote_identifier(a.schema);
      out.push_back('.');
      out += quote_identifier(a.prefix + std::string(key.substr(2)));
    } else if (key.starts_with("n:")) {
      out += quote_identifier(a.prefix + std::string(key.substr(2)));
    } else if (key == "lock_class") {
      out += std::to_string(node_lock_class(a));
    } else if (key == "coordination_lock_class") {
      out += std::to_string(coordination_lock_class(a));
    } else if (key == "wake_channel" || key == "coordination_channel" || key == "results_channel") {
      out.push_back('\'');
      for (char c : key == "wake_channel"           ? wake_channel(a)
                    : key == "coordination_channel" ? coordination_channel(a)
                                                    : results_channel(a)) {
        if (c == '\'')
          out.push_back(c);
        out.push_back(c);
      }
      out.push_back('\'');
    } else {
      throw error(errc::bug, fmt::format("unknown SQL placeholder {{{{{}}}}}", key));
    }
    pos = close + 2;
  }
  return out;
}

std::string for_version(std::string_view text, int version) {
  std::string out;
  out.reserve(text.size());
  std::size_t pos = 0;
  while (pos < text.size()) {
    auto eol = text.find('\n', pos);
    auto line =
      text.substr(pos, eol == std::string_view::npos ? std::string_view::npos : eol - pos + 1);
    pos += line.size();
    auto body = line;
    while (!body.empty() && (body.back() == '\n' || body.back() == ' '))
      body.remove_suffix(1);
    bool keep = true;
    for (auto [tag, from_on] : {std::pair{"-- since ", true}, std::pair{"-- before ", false}}) {
      auto at = body.rfind(tag);
      if (at == std::string_view::npos)
        continue;
      auto number = body.substr(at + std::string_view(tag).size());
      if (number.empty() || number.find_first_not_of("0123456789") != std::string_view::npos)
        continue;
      auto n = std::stoi(std::string(number));
      keep = from_on ? version >= n : version < n;
    }
    if (keep)
      out.append(line);
  }
  return out;
}

statement_set::statement_set(area a) : area_(std::move(a)), version_(latest_migration()) {
  validate_area(area_);
  const auto& all = embedded::statements();
  if (all.size() != statement_count)
    throw error(errc::bug, "the embedded statements do not match storage/statement_ids.hpp");
  auto latest = latest_migration();
  for (int v = oldest_node_version; v <= latest; ++v) {
    auto& set = by_version_.emplace_back();
    set.reserve(all.size());
    for (const auto& st : all) {
      auto text = for_version(st.text, v);
      auto name = std::string(st.name);
      if (v < latest && text != for_version(st.text, latest))
        name += "_v" + std::to_string(v);
      set.push_back(statement{std::move(name), render_sql(text, area_)});
    }
  }
}

void statement_set::use_version(int version) const {
  if (version < oldest_node_version || version > latest_migration())
    throw error(errc::bug, fmt::format("no statements for schema version {}", version));
  version_.store(version, std::memory_order_relaxed);
}

statement_set_ptr make_statement_set(const area& a) {
  return std::make_shared<const statement_set>(a);
}

} // namespace troupe::storage
