// The producer side for plain C++ code: publish messages without a worker node or an actor
// system. Thread-safe; holds one connection, opened on first use and reopened after a loss.
#pragma once

#include "troupe/area.hpp"
#include "troupe/message.hpp"

#include <memory>
#include <string>
#include <vector>

namespace troupe::storage {
struct new_message;
} // namespace troupe::storage

namespace troupe {

/// The storage row of a message (also what `enqueue_atom` takes from CAF producers).
storage::new_message to_new_message(const message& m);

/// Where a client publishes.
struct client_options {
  /// libpq connection string or URI; empty means libpq's PG* environment variables.
  std::string dsn;
  troupe::area area;
  std::string application_name = "troupe-client";
};

/// Publishes messages into an area.
class client {
public:
  explicit client(client_options options);
  ~client();
  client(const client&) = delete;
  client& operator=(const client&) = delete;

  /// Publishes one message (one statement, one NOTIFY at commit) and returns it as stored.
  /// Throws troupe::error: invalid_argument for a bad queue name, connection_lost and others
  /// from the database.
  message enqueue(message m);

  /// Publishes messages in one statement and one transaction: all or none.
  std::vector<message> enqueue_batch(std::vector<message> batch);

private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

} // namespace troupe
