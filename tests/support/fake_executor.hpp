// An executor that runs nothing: it records what its consumer sends it, and the test decides
// which message starts (by moving the slot's gate, as a real executor does) and what it reports.
// For the deterministic tests of the consumer's parts.
#pragma once

#include "actors/executor.hpp"

#include <atomic>
#include <memory>
#include <utility>
#include <vector>

namespace troupe::testkit {

struct fake_executor final : actors::executor {
  std::shared_ptr<std::atomic<std::uint64_t>> gate;
  actors::report_outcome report;
  /// Every run() in order: the messages, and the ticket of the first.
  std::vector<std::pair<std::vector<storage::claimed_message>, std::uint64_t>> runs;
  bool abandoned = false;
  bool running_task = false;

  fake_executor(std::shared_ptr<std::atomic<std::uint64_t>> g, actors::report_outcome r)
      : gate(std::move(g)), report(std::move(r)) {}

  void run(std::vector<storage::claimed_message> msgs, std::uint64_t first) override {
    runs.emplace_back(std::move(msgs), first);
  }
  bool busy() const noexcept override { return running_task; }
  void abandon() noexcept override { abandoned = true; }

  /// Starts the message holding `ticket`, as a real executor would: only if the consumer has
  /// not taken it back. Returns whether it started.
  bool start(std::uint64_t ticket) {
    auto expected = ticket - 1;
    return gate->compare_exchange_strong(expected, ticket);
  }
  /// The ids of every message sent, in order.
  std::vector<std::string> sent_ids() const {
    std::vector<std::string> out;
    for (const auto& [msgs, first] : runs)
      for (const auto& m : msgs)
        out.push_back(m.id);
    return out;
  }
};

/// Collects the fake executors a consumer or a slot set makes (they are owned there).
struct fake_executors {
  std::vector<fake_executor*> made;

  actors::executor_factory factory() {
    return [this](std::shared_ptr<std::atomic<std::uint64_t>> gate,
                  actors::report_outcome report) -> std::unique_ptr<actors::executor> {
      auto e = std::make_unique<fake_executor>(std::move(gate), std::move(report));
      made.push_back(e.get());
      return e;
    };
  }
};

/// A claimed message with the fields the start order reads.
inline storage::claimed_message claimed(std::string id, std::int32_t priority,
                                        std::int64_t eta_ms = 0, std::uint64_t claim = 1) {
  storage::claimed_message m;
  m.id = std::move(id);
  m.task = "job";
  m.args_json = "[]";
  m.options_json = "{}";
  m.attempt = 1;
  m.priority = priority;
  m.eta_ms = eta_ms;
  m.claim = claim;
  return m;
}

} // namespace troupe::testkit
