// Helpers of the typed calls in storage/queries.cpp, publish_queries.cpp and operations.cpp: one
// column of many rows as a PostgreSQL array literal (the statements take parallel arrays).
#pragma once

#include "storage/connection.hpp"

#include <optional>
#include <string>
#include <vector>

namespace troupe::storage::detail {

/// Empty text as SQL NULL.
inline std::optional<std::string> nullable(const std::string& s) {
  if (s.empty())
    return std::nullopt;
  return s;
}

/// `get(row)` of each row, as a text array literal.
template <class T, class F>
std::string column(const std::vector<T>& rows, F&& get) {
  std::vector<std::string> items;
  items.reserve(rows.size());
  for (const auto& r : rows)
    items.push_back(get(r));
  return array_literal(items);
}

/// The same, empty text as NULL.
template <class T, class F>
std::string nullable_column(const std::vector<T>& rows, F&& get) {
  std::vector<std::optional<std::string>> items;
  items.reserve(rows.size());
  for (const auto& r : rows)
    items.push_back(nullable(get(r)));
  return array_literal(items);
}

} // namespace troupe::storage::detail
