// The typed calls on the nodes registry and node liveness (storage/queries.hpp declares them).
#include "storage/migrations.hpp"
#include "storage/naming.hpp"
#include "storage/queries.hpp"
#include "storage/schedules.hpp"
#include "troupe/error.hpp"

#include <fmt/format.h>

namespace troupe::storage {

namespace {

params identity_params(const node_identity& who, const statement_set& stmts) {
  return {who.name, who.host, std::to_string(who.pid), array_literal(who.queues),
          std::to_string(node_lock_class(stmts.where()))};
}

} // namespace

std::int32_t register_node(connection& conn, const statement_set& stmts, const node_identity& who) {
  // A node on an area that misses migrations would fail later, statement by statement.
  auto version = current_version(conn, stmts);
  if (version < oldest_node_version)
    throw error(errc::bug, fmt::format("area (schema \"{}\", prefix \"{}\") is at schema "
                                       "version {} and this Troupe needs version {} or later: "
                                       "run `troupe {}` first",
                                       stmts.where().schema, stmts.where().prefix, version,
                                       oldest_node_version, version == 0 ? "init" : "upgrade"));
  // An area behind this Troupe but not too far: the node runs the statements of its version,
  // without the features of the migrations it lacks (the listener says which).
  if (version != stmts.version())
    stmts.use_version(std::min(version, latest_migration()));
  auto p = identity_params(who, stmts);
  if (stmts.version() >= schedules_version)
    p.push_back(array_literal(who.tasks));
  auto res = conn.run(stmts.get(sql::register_node), p);
  return static_cast<std::int32_t>(res.int64(0, 0));
}

bool reregister_node(connection& conn, const statement_set& stmts, const node_identity& who,
                     std::int32_t node_id) {
  auto p = identity_params(who, stmts);
  p.push_back(std::to_string(node_id));
  if (stmts.version() >= schedules_version)
    p.push_back(array_literal(who.tasks));
  return conn.run(stmts.get(sql::reregister_node), p).affected() > 0;
}

bool holds_node_lock(connection& conn, const statement_set& stmts, std::int32_t node_id) {
  return conn
           .run(stmts.get(sql::holds_node_lock),
                {std::to_string(node_lock_class(stmts.where())), std::to_string(node_id)})
           .text(0, 0) == "t";
}

void deregister_node(connection& conn, const statement_set& stmts, std::int32_t node_id) {
  conn.run(stmts.get(sql::deregister_node), {std::to_string(node_id)});
}

void prepare_listener_session(connection& conn, const statement_set& stmts) {
  // A listener only waits for notifications: a server-side idle timeout must not end its
  // session (that would release the node's liveness lock; PostgreSQL 14 added the setting).
  // Taking the lock back after a reconnect may wait for the old session to be noticed as gone:
  // bounded, so a stop request is never stuck behind it.
  if (conn.server_version() >= 140000)
    conn.run(stmts.get(sql::listener_idle_timeout), {});
  conn.run(stmts.get(sql::listener_lock_timeout), {});
}

void listen_for_wakes(connection& conn, const statement_set& stmts) {
  conn.listen(wake_channel(stmts.where()));
}

void listen_for_results(connection& conn, const statement_set& stmts) {
  conn.listen(results_channel(stmts.where()));
}

std::vector<troupe::node_status> list_nodes(connection& conn, const statement_set& stmts) {
  auto res = conn.run(stmts.get(sql::list_nodes), {std::to_string(node_lock_class(stmts.where()))});
  std::vector<troupe::node_status> out;
  out.reserve(static_cast<std::size_t>(res.rows()));
  for (int r = 0; r < res.rows(); ++r) {
    troupe::node_status n;
    n.node_id = static_cast<std::int32_t>(res.int64(r, 0));
    n.name = res.text(r, 1);
    n.host = res.text(r, 2);
    n.pid = static_cast<std::int32_t>(res.int64(r, 3));
    n.queues = parse_array_literal(res.text(r, 4));
    n.started_at_ms = res.int64(r, 5);
    n.alive = res.text(r, 6) == "t";
    n.running = res.int64(r, 7);
    n.prefetched = res.int64(r, 8);
    out.push_back(std::move(n));
  }
  return out;
}

reap_report reap_dead_nodes(connection& conn, const statement_set& stmts,
                            std::chrono::milliseconds grace) {
  auto res = conn.run(stmts.get(sql::reap_dead_nodes),
                      {std::to_string(node_lock_class(stmts.where())),
                       std::to_string(grace.count()), wake_channel(stmts.where())});
  reap_report out;
  out.dead_nodes = res.int64(0, 0);
  out.recovered = res.int64(0, 1);
  out.queues = parse_array_literal(res.text(0, 2));
  out.suspect_nodes = res.int64(0, 3);
  out.cleared_nodes = res.int64(0, 4);
  // Expired deduplication keys go in one bounded batch (1,000) per pass.
  out.pruned_keys = prune_deduplication_keys(conn, stmts, 1000);
  return out;
}

} // namespace troupe::storage
