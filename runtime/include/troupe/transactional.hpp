// Publishing inside the caller's own PostgreSQL transaction: the message exists (and its
// notification is delivered) only if the caller's business write commits.
//
//   PQexec(conn, "BEGIN");
//   PQexec(conn, "INSERT INTO orders ...");
//   troupe::enqueue_in_transaction(conn, troupe::area{}, ship_order(order_id));
//   PQexec(conn, "COMMIT");     // or ROLLBACK: then neither the order nor the message exists
#pragma once

#include "troupe/area.hpp"
#include "troupe/enqueue_options.hpp"
#include "troupe/message.hpp"
#include "troupe/middleware.hpp"

#include <vector>

struct pg_conn; // libpq's PGconn

namespace troupe {

/// Publishes `m` on `conn`, which must be inside a transaction: refused with
/// errc::not_in_transaction before any SQL otherwise. Troupe never begins, commits, rolls back
/// or closes the caller's connection. Without a deduplication key this is one statement: if it
/// fails, the caller's transaction is aborted and the caller must roll back. With a key it runs
/// in a savepoint, and a failure undoes only its own writes. The hooks of `middleware` run
/// around the SQL (after_enqueue means "written in the transaction", not "committed"). Returns
/// the message, or the message holding its live deduplication key.
message enqueue_in_transaction(pg_conn* conn, const area& where, message m,
                               const enqueue_options& options = {},
                               const std::vector<middleware_ptr>& middleware = {});

/// Publishes `batch` (at most 1,000 messages, `options` empty or one entry per message) on
/// `conn` inside a savepoint: all or none, and a failure rolls back to the savepoint only, so
/// the caller's earlier writes stay intact and its transaction stays usable. An empty batch
/// still requires a transaction and runs no SQL. Results keep the input order.
std::vector<message>
enqueue_many_in_transaction(pg_conn* conn, const area& where, std::vector<message> batch,
                            std::vector<enqueue_options> options = {},
                            const std::vector<middleware_ptr>& middleware = {});

} // namespace troupe
