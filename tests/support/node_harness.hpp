// For pg suites that run a worker node in the test process: a scratch area, a producer, an
// actor system, the node's tasks, and the node itself (stopped gracefully at the end).
#pragma once

#include "scratch_area.hpp"
#include "troupe/caf.hpp"
#include "troupe/client.hpp"

#include <fmt/format.h>

#include <chrono>
#include <memory>
#include <optional>

namespace troupe::testkit {

struct node_harness {
  scratch_area area;
  client producer{client_options{area.dsn(), area.where()}};
  caf::actor_system_config cfg;
  std::optional<caf::actor_system> system{std::in_place, cfg};
  caf::actor_system& sys = *system; // until shut_down_actor_system()
  std::shared_ptr<task_registry> tasks = std::make_shared<task_registry>();
  std::optional<node_actor> node;

  ~node_harness() {
    if (node && system)
      stop();
  }

  /// Destroys the actor system (the node must be stopped first); `sys` is gone afterwards.
  void shut_down_actor_system() { system.reset(); }

  /// Settings of a node on this area with one queue, "default".
  node_options options(queue_options q = {}) const {
    node_options o;
    o.dsn = area.dsn();
    o.area = area.where();
    o.queues.push_back(std::move(q));
    return o;
  }

  void start_node(node_options o) { node = spawn_worker_node(sys, std::move(o), tasks); }
  void start_node() { start_node(options()); }

  /// Stops the node gracefully and returns its report.
  node_report stop() {
    caf::scoped_actor self{sys};
    node_report r;
    self->request(*node, std::chrono::seconds(30), stop_atom_v)
      .receive([&](const node_report& x) { r = x; }, [](caf::error&) {});
    node.reset();
    return r;
  }

  /// Rows of the queue table matching `where`.
  std::int64_t count(const std::string& where) {
    return area.scalar(fmt::format("SELECT count(*) FROM {} WHERE {}", area.queue_table(), where));
  }
};

} // namespace troupe::testkit
