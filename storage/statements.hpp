// The named statements of one area: the embedded templates with the area's quoted identifiers
// filled in. Built once per area and shared read-only by every connection of that area.
#pragma once

#include "troupe/area.hpp"

#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>

namespace troupe::storage {

/// A statement ready to run: its name (prepared-statement name, log field, metric label) and
/// its SQL text for one area.
struct statement {
  std::string name;
  std::string text;
};

/// Replaces {{schema}}, {{t:name}}, {{n:name}} and {{lock_class}} in `text` for area `a`.
/// Throws troupe::error(bug) on an unknown placeholder.
std::string render_sql(std::string_view text, const area& a);

/// Every named statement of one area.
class statement_set {
public:
  explicit statement_set(area a);

  const area& where() const noexcept { return area_; }

  /// The statement called `name`; throws troupe::error(bug) when there is none.
  const statement& get(std::string_view name) const;

private:
  area area_;
  std::unordered_map<std::string, statement> by_name_;
};

using statement_set_ptr = std::shared_ptr<const statement_set>;

/// The statements of area `a` (validated first).
statement_set_ptr make_statement_set(const area& a);

} // namespace troupe::storage
