#include "actors/consumer.hpp"
#include "actors/execute.hpp"
#include "troupe/log.hpp"

namespace troupe::actors {

namespace {

struct executor_state {
  static inline const char* name = "troupe.executor";
};

executor_actor::behavior_type executor_impl(executor_actor::stateful_pointer<executor_state> self,
                                            std::shared_ptr<const task_registry> registry,
                                            std::string queue, consumer_actor consumer,
                                            std::int32_t slot,
                                            std::shared_ptr<const std::atomic<bool>> stopping,
                                            std::shared_ptr<std::atomic<std::uint64_t>> gate) {
  self->set_default_handler(
    [](caf::scheduled_actor*, caf::message_view& x) -> caf::result<caf::message> {
      log().warn("executor: unexpected message {}", caf::to_string(x.content()));
      return caf::sec::unexpected_message;
    });
  return {
    [=](run_atom, const std::vector<storage::claimed_message>& msgs, std::uint64_t first) {
      auto ticket = first;
      for (const auto& msg : msgs) {
        // Started only if the consumer has not taken it back: then the gate holds the ticket
        // sent just before this one. A message taken back is dropped unseen.
        auto expected = ticket - 1;
        if (!gate->compare_exchange_strong(expected, ticket++))
          continue;
        // execute() catches everything the task throws: an exception never kills this actor.
        auto out = execute(*registry, msg, queue, stopping.get());
        if (out.state != storage::outcome_state::done)
          log().warn("task failed queue={} message={} task={} attempt={} retry={} error={}", queue,
                     msg.id, msg.task, msg.attempt, out.state == storage::outcome_state::retry,
                     out.error_json);
        self->send(consumer, executed_atom_v, slot, std::move(out));
      }
    },
  };
}

} // namespace

executor_actor spawn_executor(caf::local_actor* parent,
                              std::shared_ptr<const task_registry> registry, std::string queue,
                              consumer_actor consumer, std::int32_t slot,
                              std::shared_ptr<const std::atomic<bool>> stopping,
                              std::shared_ptr<std::atomic<std::uint64_t>> gate) {
  // Linked: when the consumer goes, its executors go too (after the task at hand returns).
  return parent->spawn<caf::detached + caf::linked>(executor_impl, std::move(registry),
                                                    std::move(queue), std::move(consumer), slot,
                                                    std::move(stopping), std::move(gate));
}

} // namespace troupe::actors
