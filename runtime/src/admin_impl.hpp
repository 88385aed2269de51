// The admin API's state (troupe/admin.hpp): its connection, statements and the checks every
// call makes first. Shared by the files that implement its calls.
#pragma once

#include "storage/connection.hpp"
#include "storage/migrations.hpp"
#include "storage/shared_connection.hpp"
#include "storage/statements.hpp"
#include "troupe/admin.hpp"
#include "troupe/error.hpp"
#include "troupe/message.hpp"

#include <fmt/format.h>

#include <optional>
#include <string>

namespace troupe {

inline std::string area_name(const area& a) {
  // Schema and prefix are validated identifiers ([a-z0-9_]): nothing to escape.
  return a.prefix.empty() ? "schema " + a.schema
                          : "schema " + a.schema + " (prefix \"" + a.prefix + "\")";
}

/// A message id as the caller typed it, in canonical form; invalid_argument when it is not a UUID.
inline std::string message_id(const std::string& id, const char* what = "message id") {
  std::string canonical;
  if (!parse_uuid(id, canonical))
    throw error(errc::invalid_argument, std::string(what) + " \"" + id + "\" is not a UUID");
  return canonical;
}

struct admin::impl {
  admin_options options;
  storage::statement_set_ptr stmts;
  std::optional<storage::shared_connection> conn;

  // Runs `f` on the connection; a connection lost before or during `f` is reopened and `f`
  // run once more (every admin call is a read, or migrations, which are idempotent).
  template <class F>
  auto with_connection(F&& f) -> decltype(f(std::declval<storage::connection&>())) {
    return conn->with([&](storage::connection& c, bool) { return f(c); });
  }

  void require_initialized(storage::connection& c) {
    auto v = storage::current_version(c, *stmts);
    if (v == 0)
      throw error(errc::not_found,
                  area_name(stmts->where()) + " is not initialized; run troupe init");
    // The statements of the area's version (an older area runs those written for it).
    if (v >= storage::oldest_node_version && v <= storage::latest_migration() &&
        v != stmts->version())
      stmts->use_version(v);
  }

  // Operations need migration 5: an older area is refused with what to run.
  void require_operations(storage::connection& c, const char* what) {
    auto v = storage::current_version(c, *stmts);
    if (v == 0)
      require_initialized(c);
    if (v < 5)
      throw error(errc::invalid_argument,
                  fmt::format("{} is at schema version {}, and {} needs version 5: run troupe "
                              "upgrade",
                              area_name(stmts->where()), v, what));
  }

  migration_report migrate(bool require_existing) {
    return with_connection([&](storage::connection& c) {
      migration_report r;
      r.from_version = storage::current_version(c, *stmts);
      if (require_existing && r.from_version == 0)
        require_initialized(c);
      r.applied = storage::migrate(c, *stmts);
      r.to_version = storage::current_version(c, *stmts);
      return r;
    });
  }
};

} // namespace troupe
