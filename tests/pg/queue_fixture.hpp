// The fixture the queue suites share (queue, queue_recovery, queue_writes): a scratch area, a
// producer, a node identity, counts of queue rows, and the wake notifications a listening
// connection got.
#pragma once

#include "scratch_area.hpp"
#include "storage/queries.hpp"
#include "troupe/client.hpp"
#include "troupe/task.hpp"

#include <libpq-fe.h>

#include <fmt/format.h>

#include <set>
#include <string>

namespace troupe::testkit {

using namespace std::chrono_literals;

struct queue_fixture {
  scratch_area area;
  client producer{client_options{area.dsn(), area.where()}};
  storage::node_identity who{"test", "host", 1, {"default"}};

  std::int32_t node(storage::connection& conn) {
    return storage::register_node(conn, area.statements(), who);
  }

  std::int64_t count(const std::string& where) {
    return area.scalar(fmt::format("SELECT count(*) FROM {} WHERE {}", area.queue_table(), where));
  }

  // The wake payloads `listener` receives, once it has `n` of them (or 5 s have passed).
  static std::multiset<std::string> wakes(storage::connection& listener, std::size_t n = 1) {
    std::multiset<std::string> payloads;
    wait_until(
      [&] {
        listener.exec("SELECT 1");
        auto* pg = reinterpret_cast<PGconn*>(listener.native());
        for (auto* note = PQnotifies(pg); note; note = PQnotifies(pg)) {
          payloads.insert(note->extra);
          PQfreemem(note);
        }
        return payloads.size() >= n;
      },
      5s);
    return payloads;
  }
};

inline const task_ref<void(int)> queue_job{"job"};

} // namespace troupe::testkit
