// The limiter actor of a worker node (limiter_actor in <troupe/caf.hpp>), and the port through
// which the node's tasks reach it (task_context::coordination, used by limit_guard).
#pragma once

#include "actors/protocol.hpp"
#include "storage/statements.hpp"
#include "troupe/coordination.hpp"

#include <mutex>

namespace troupe::actors {

struct limiter_settings {
  std::string dsn;
  storage::statement_set_ptr statements;
  /// The node whose slots these are (0 outside a node: slots live until their TTL or their
  /// release).
  std::int32_t node_id = 0;
};

limiter_actor spawn_limiter_actor(caf::actor_system& sys, limiter_settings settings);

/// Forwards a task's guard to the node's current limiter actor (a restarted one replaces it),
/// blocking the task's thread until the reply, for at most a minute. It holds the actor
/// weakly: a task's thread that outlives its node (abandoned past its time limit) keeps
/// neither the actor nor its actor system alive, and its guards then fail (shutting_down).
class limiter_port final : public coordination_port {
public:
  /// `declared`: the node's named limiters (node_options::limits).
  explicit limiter_port(std::vector<limit> declared) : declared_(std::move(declared)) {}
  void set(limiter_actor a);
  bool acquire(const limit& l, const std::string& holder, std::chrono::milliseconds ttl) override;
  void release(const limit& l, const std::string& holder) override;
  const std::vector<limit>& declared() const noexcept override { return declared_; }

private:
  limiter_actor current();
  std::mutex mutex_;
  caf::weak_actor_ptr actor_;
  const std::vector<limit> declared_;
};

} // namespace troupe::actors
