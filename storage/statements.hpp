// The named statements of one area: the embedded templates with the area's quoted identifiers
// filled in. Built once per area and shared read-only by every connection of that area.
#pragma once

#include "storage/statement_ids.hpp"
#include "troupe/area.hpp"

#include <memory>
#include <string>
#include <string_view>
#include <vector>

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

/// Every named statement of one area, by its generated id (storage::sql::claim_batch, ...).
class statement_set {
public:
  explicit statement_set(area a);

  const area& where() const noexcept { return area_; }

  /// The statement `id`.
  const statement& get(statement_id id) const noexcept {
    return by_id_[static_cast<std::size_t>(id)];
  }

private:
  area area_;
  std::vector<statement> by_id_;
};

using statement_set_ptr = std::shared_ptr<const statement_set>;

/// The statements of area `a` (validated first).
statement_set_ptr make_statement_set(const area& a);

} // namespace troupe::storage
