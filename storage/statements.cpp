#include "storage/statements.hpp"

#include "storage/embedded_sql.hpp"
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
    } else {
      throw error(errc::bug, fmt::format("unknown SQL placeholder {{{{{}}}}}", key));
    }
    pos = close + 2;
  }
  return out;
}

statement_set::statement_set(area a) : area_(std::move(a)) {
  validate_area(area_);
  const auto& all = embedded::statements();
  if (all.size() != statement_count)
    throw error(errc::bug, "the embedded statements do not match storage/statement_ids.hpp");
  by_id_.reserve(all.size());
  for (const auto& st : all)
    by_id_.push_back(statement{std::string(st.name), render_sql(st.text, area_)});
}

statement_set_ptr make_statement_set(const area& a) {
  return std::make_shared<const statement_set>(a);
}

} // namespace troupe::storage
