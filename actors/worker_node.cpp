// The standalone worker node: its own actor system, signals, and the graceful stop; and
// spawn_worker_node, which a CAF application calls instead.
#include "troupe/worker_node.hpp"

#include "actors/node_supervisor.hpp"
#include "actors/protocol.hpp"
#include "troupe/log.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <atomic>
#include <csignal>
#include <cstdlib>
#include <functional>
#include <malloc.h>
#include <mutex>
#include <pthread.h>

namespace troupe {

namespace {

// Large messages must not leave the process large. glibc serves an allocation of at least its
// mmap threshold with a mapping of its own, returned to the system when freed; but it raises
// that threshold to the size of each such block freed (up to 32 MiB), after which blocks of
// that size come from the heaps of the threads that used them and stay there. A fixed
// threshold of 1 MiB turns that off: a message of 10 MB, its query result and its copies are
// mappings, gone once the message is done (docs/operations.md, "Limits").
void keep_large_allocations_returnable() {
  static std::once_flag once;
  std::call_once(once, [] { mallopt(M_MMAP_THRESHOLD, 1 << 20); });
}

} // namespace

void check_queues_served(const node_options& options, const task_registry& tasks) {
  for (const auto& q : options.queues) {
    if (!tasks.names_on(q.name).empty())
      continue;
    auto served = tasks.queues();
    throw error(errc::invalid_argument,
                fmt::format("queues.{}: no registered task runs on queue \"{}\" (the tasks "
                            "registered run on: {}); register one, or name the queue in a task's "
                            "task_options::also_queues",
                            q.name, q.name,
                            served.empty() ? std::string{"none, no task is registered"}
                                           : fmt::format("{}", fmt::join(served, ", "))));
  }
}

node_actor spawn_worker_node(caf::actor_system& sys, node_options options,
                             std::shared_ptr<const task_registry> tasks) {
  if (!tasks)
    throw error(errc::invalid_argument, "spawn_worker_node: no task registry given");
  validate(options); // names and ranges first: a bad queue name is refused as such
  check_queues_served(options, *tasks);
  keep_large_allocations_returnable();
  return actors::spawn_node_supervisor(sys, std::move(options), std::move(tasks));
}

struct worker_node::impl {
  node_options options;
  std::shared_ptr<const task_registry> tasks;
  std::atomic<bool> stop_requested{false};
  std::promise<node_info> ready_promise;
  std::shared_future<node_info> ready = ready_promise.get_future().share();
  std::atomic<bool> ready_set{false};

  void set_ready(node_info info) {
    if (!ready_set.exchange(true))
      ready_promise.set_value(std::move(info));
  }
  void set_failed(const std::string& why) {
    if (!ready_set.exchange(true))
      ready_promise.set_exception(std::make_exception_ptr(error(errc::shutting_down, why)));
  }
};

worker_node::worker_node(node_options options, task_registry tasks)
    : impl_(std::make_unique<impl>()) {
  validate(options);
  check_queues_served(options, tasks);
  impl_->options = std::move(options);
  impl_->tasks = std::make_shared<const task_registry>(std::move(tasks));
}

worker_node::~worker_node() {
  impl_->set_failed("the worker node was destroyed before it was ready");
}

void worker_node::request_stop() {
  impl_->stop_requested = true;
}

std::shared_future<node_info> worker_node::ready() const {
  return impl_->ready;
}

namespace {

// Asks the node once whether it is ready and tells `state` the answer.
void tell_ready(caf::event_based_actor* helper, node_actor node,
                std::function<void(node_info)> ready, std::function<void(std::string)> failed) {
  helper->request(node, caf::infinite, ready_atom_v)
    .then(
      [=](const node_report& r) {
        ready(node_info{r.node_id, r.name});
      },
      [=](caf::error& err) { failed("the node did not start: " + describe(err)); });
}

} // namespace

run_summary worker_node::run() {
  using namespace std::chrono;
  // Block the stop signals before the actor system starts its threads, so every thread
  // inherits the mask and only the loop below (sigtimedwait) receives them.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  run_summary summary;
  caf::actor_system_config cfg;
  cfg.set("scheduler.max-threads", static_cast<std::size_t>(impl_->options.scheduler_threads));
  // An idle scheduler thread spins briefly, then waits to be woken by the next message. CAF's
  // default puts 500 sleeps of 50 us between the two: a message arriving then waits for the
  // sleep to end, and the sleeps alone cost a thread wake-up each. Without them the latency
  // from a notification to a task's start fell by about 0.3 ms at 24,000 messages/s.
  cfg.set("work-stealing.moderate-poll-attempts", std::size_t{0});
  caf::actor_system sys{cfg};
  caf::scoped_actor self{sys};
  auto node = spawn_worker_node(sys, impl_->options, impl_->tasks);
  self->monitor(node);
  // Tells ready() once the node claims: a helper actor, so this thread keeps its loop. (It is
  // spawned with arguments: CAF 0.17 spawning a function of no arguments trips UBSan.)
  auto* state = impl_.get();
  sys.spawn(tell_ready, node,
            std::function<void(node_info)>([state](node_info i) { state->set_ready(i); }),
            std::function<void(std::string)>([state](std::string why) { state->set_failed(why); }));

  bool node_down = false;
  timespec tick{0, 100'000'000}; // 100 ms: how often request_stop() is looked at
  while (!node_down) {
    int sig = sigtimedwait(&stop_signals, nullptr, &tick);
    if (sig == SIGTERM || sig == SIGINT) {
      log().info("received {}; stopping gracefully", sig == SIGTERM ? "SIGTERM" : "SIGINT");
      break;
    }
    if (impl_->stop_requested)
      break;
    self->receive(
      [&](caf::down_msg& dm) {
        node_down = true;
        log().error("worker node failed: {}", describe(dm.reason));
        summary.exit_code = 1;
      },
      caf::after(milliseconds{0}) >> [] {});
  }
  if (!node_down) {
    auto limit = impl_->options.shutdown_grace + seconds(60);
    self->request(node, limit, stop_atom_v)
      .receive(
        [&](const node_report& r) {
          summary.executed = r.executed;
          summary.released = r.released;
          summary.abandoned = r.abandoned;
        },
        [&](caf::error& err) {
          // Some actor is stuck (a database call that does not return): the actor system
          // would wait for it forever.
          log().error("graceful stop failed: {}; exiting without waiting for the node",
                      describe(err));
          log().flush();
          std::_Exit(1);
        });
  }
  impl_->set_failed("the node stopped before it was ready");
  if (summary.abandoned > 0)
    log().warn("{} task(s) abandoned and still running; their threads end when their task "
               "returns or the process exits",
               summary.abandoned);
  return summary;
}

} // namespace troupe
