#include "storage/coordination.hpp"

#include "storage/naming.hpp"
#include "troupe/error.hpp"

#include <fmt/format.h>

namespace troupe::storage {

namespace {

// The functions of migration 7 raise invalid_parameter_value (a limiter used as another kind,
// a barrier re-created with another party count) and no_data_found (no such barrier) with a
// message that names the key: that message is the error, without the statement's label.
template <class F>
auto refusals_named(F run) {
  try {
    return run();
  } catch (const error& e) {
    if (e.sqlstate() != "22023" && e.sqlstate() != "P0002")
      throw;
    std::string text = e.what();
    if (auto at = text.find("ERROR:"); at != std::string::npos) {
      text.erase(0, at + 6);
      text.erase(0, text.find_first_not_of(' '));
    }
    if (auto eol = text.find('\n'); eol != std::string::npos)
      text.erase(eol);
    throw error(e.sqlstate() == "22023" ? errc::invalid_argument : errc::not_found, text,
                e.sqlstate());
  }
}

std::optional<std::string> node_param(std::int32_t node_id) {
  if (node_id == 0)
    return std::nullopt;
  return std::to_string(node_id);
}

} // namespace

error coordination_missing(int version) {
  return error(errc::invalid_argument,
               fmt::format("limiters and barriers need migration {} (the area is at version {}): "
                           "run troupe upgrade",
                           coordination_version, version));
}

bool limit_acquire(connection& conn, const statement_set& stmts, const limiter_key& l,
                   const std::string& holder, std::int32_t node_id, std::int64_t ttl_ms) {
  return refusals_named([&] {
    return conn
             .run(stmts.get(sql::limit_acquire),
                  {l.scope, l.name, l.kind, std::to_string(l.capacity), std::to_string(l.window_ms),
                   holder, node_param(node_id), std::to_string(ttl_ms)})
             .text(0, 0) == "t";
  });
}

bool limit_release(connection& conn, const statement_set& stmts, const limiter_key& l,
                   const std::string& holder) {
  return conn.run(stmts.get(sql::limit_release), {l.scope, l.name, holder}).text(0, 0) == "t";
}

std::int64_t limit_in_use(connection& conn, const statement_set& stmts, const limiter_key& l) {
  auto res = conn.run(stmts.get(sql::limit_holds), {l.scope, l.name});
  return l.kind == "bucket" ? res.int64(0, 1) : res.int64(0, 0);
}

bool barrier_create(connection& conn, const statement_set& stmts, const std::string& name,
                    std::int32_t parties, std::int64_t ttl_ms) {
  return refusals_named([&] {
    return conn
             .run(stmts.get(sql::barrier_create),
                  {name, std::to_string(parties), std::to_string(ttl_ms)})
             .text(0, 0) == "t";
  });
}

bool barrier_arrive(connection& conn, const statement_set& stmts, const std::string& name) {
  return refusals_named(
    [&] { return conn.run(stmts.get(sql::barrier_arrive), {name}).text(0, 0) == "t"; });
}

std::optional<bool> barrier_released(connection& conn, const statement_set& stmts,
                                     const std::string& name) {
  auto res = conn.run(stmts.get(sql::barrier_released), {name});
  if (res.rows() == 0)
    return std::nullopt;
  return res.text(0, 0) == "t";
}

void listen_for_barriers(connection& conn, const statement_set& stmts) {
  conn.listen(coordination_channel(stmts.where()));
}

std::int64_t purge_coordination(connection& conn, const statement_set& stmts,
                                std::int64_t idle_ms) {
  return conn.run(stmts.get(sql::purge_coordination), {std::to_string(idle_ms)}).int64(0, 0);
}

} // namespace troupe::storage
