// Publishing inside the caller's own PostgreSQL transaction: the message exists (and its
// notification is delivered) only if the caller's business write commits.
//
//   PQexec(conn, "BEGIN");
//   PQexec(conn, "INSERT INTO orders ...");
//   troupe::enqueue_in_transaction(conn, troupe::area{}, ship_order(order_id));
//   PQexec(conn, "COMMIT");     // or ROLLBACK: then neither the order nor the message exists
#pragma once

#include "troupe/area.hpp"
#include "troupe/message.hpp"
#include "troupe/middleware.hpp"

#include <vector>

struct pg_conn; // libpq's PGconn

namespace troupe {

/// Publishes `m` on `conn`, which must be inside a transaction: refused with
/// errc::not_in_transaction before any SQL otherwise. Troupe never begins, commits, rolls back
/// or closes the caller's connection. One statement: if it fails, the caller's transaction is
/// aborted and the caller must roll back. The hooks of `middleware` run around the statement
/// (after_enqueue means "written in the transaction", not "committed"). Returns the message.
message enqueue_in_transaction(pg_conn* conn, const area& where, message m,
                               const std::vector<middleware_ptr>& middleware = {});

/// Publishes `batch` (at most 1,000 messages) on `conn` inside a savepoint: all or none, and a
/// failure rolls back to the savepoint only, so the caller's earlier writes stay intact and its
/// transaction stays usable. An empty batch still requires a transaction and runs no SQL.
std::vector<message>
enqueue_many_in_transaction(pg_conn* conn, const area& where, std::vector<message> batch,
                            const std::vector<middleware_ptr>& middleware = {});

/// The most messages one batch may hold.
inline constexpr std::size_t max_batch_size = 1000;

} // namespace troupe
