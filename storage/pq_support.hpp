// Helpers the storage sources share around libpq: checking a result, the parameter arrays
// libpq takes, trimming its messages. Internal to storage/ (its sources include libpq-fe.h).
#pragma once

#include "storage/connection.hpp"

#include <string>
#include <string_view>
#include <vector>

namespace troupe::storage::detail {

/// `res` as an owned result; throws the troupe::error it stands for when the statement failed
/// (throw_error), `label` naming the statement.
result checked(pg_conn* conn, pg_result* res, std::string_view label);

/// libpq's parameter array for `values` (pointers into `values`, which must outlive it).
struct param_arrays {
  std::vector<const char*> values;
  explicit param_arrays(const params& ps) {
    values.reserve(ps.size());
    for (const auto& p : ps)
      values.push_back(p ? p->c_str() : nullptr);
  }
};

/// A libpq message without its trailing newline and spaces.
std::string trimmed(const char* text);

} // namespace troupe::storage::detail
