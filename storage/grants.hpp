// The least-privilege grants of an area (admin::grants_sql, `troupe sql grants`): what a
// producer, a worker node and an operator each need, and nothing more.
#pragma once

#include "troupe/admin_records.hpp"
#include "troupe/area.hpp"

#include <string>

namespace troupe::storage {

/// The GRANT statements of `roles` on area `a` (roles left empty get none), as one script.
std::string grants_script(const area& a, const area_roles& roles);

} // namespace troupe::storage
