// The named statements of one area: the embedded templates with the area's quoted identifiers
// filled in. Built once per area and shared read-only by every connection of that area.
#pragma once

#include "storage/statement_ids.hpp"
#include "troupe/area.hpp"

#include <atomic>
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

/// Replaces {{schema}}, {{t:name}}, {{n:name}}, {{lock_class}} and {{wake_channel}} (the area's
/// wake channel as a string literal) in `text` for area `a`. Throws troupe::error(bug) on an
/// unknown placeholder.
std::string render_sql(std::string_view text, const area& a);

/// The oldest area version a worker node runs on: an area at a version from this one up to the
/// latest gets the statements written for its version, and the features of later migrations are
/// off (the node says so at start).
inline constexpr int oldest_node_version = 4;

/// `text` as an area at schema version `version` runs it: a line that ends with the comment
/// "-- since N" is kept only from version N on, one that ends with "-- before N" only below it.
std::string for_version(std::string_view text, int version);

/// Every named statement of one area, by its generated id (storage::sql::claim_batch, ...).
class statement_set {
public:
  explicit statement_set(area a);

  const area& where() const noexcept { return area_; }

  /// The statement `id`, as the area's version runs it.
  const statement& get(statement_id id) const noexcept { return get(id, version()); }
  /// The statement `id` as an area at `version` (one version() gave) runs it: for a caller
  /// whose parameters depend on the version too, which must not change in between.
  const statement& get(statement_id id, int version) const noexcept {
    return by_version_[static_cast<std::size_t>(version - oldest_node_version)]
                      [static_cast<std::size_t>(id)];
  }

  /// The area's schema version the statements are for: the latest until a node finds its area
  /// at an older one (from oldest_node_version on) and says so. Statements whose text differs
  /// at that version carry its number in their name ("claim_lock_v4").
  int version() const noexcept { return version_.load(std::memory_order_relaxed); }
  void use_version(int version) const;

private:
  area area_;
  std::vector<std::vector<statement>> by_version_; // from oldest_node_version to the latest
  mutable std::atomic<int> version_;
};

using statement_set_ptr = std::shared_ptr<const statement_set>;

/// The statements of area `a` (validated first).
statement_set_ptr make_statement_set(const area& a);

} // namespace troupe::storage
