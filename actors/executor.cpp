#include "actors/executor.hpp"

#include "actors/execute.hpp"
#include "troupe/log.hpp"

#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

namespace troupe::actors {

namespace {

// How long an executor waits for the start of a message that came back from a dead node to be
// written: past the storage request's own bound, so the consumer's verdict comes first.
constexpr std::chrono::seconds start_confirm_bound{35};

// What an executor's thread shares with the executor object: the thread holds it until it
// ends, so an abandoned thread outlives its consumer, and even its actor system, safely.
struct shared_state {
  executor_context context;
  std::shared_ptr<std::atomic<std::uint64_t>> gate;

  std::mutex mutex;
  std::condition_variable wake;
  std::deque<std::pair<storage::claimed_message, std::uint64_t>> queued; // message, ticket
  bool stopping = false; // abandoned: start nothing more, then end
  bool idle = true;      // waiting for work (under the mutex)
  std::atomic<bool> running_task{false};

  // The report callback, reset by abandon() under its own mutex so that no report can be under
  // way once abandon() returns.
  std::mutex report_mutex;
  report_outcome report;
};

void run_loop(const std::shared_ptr<shared_state>& s) {
  for (;;) {
    std::pair<storage::claimed_message, std::uint64_t> next;
    {
      std::unique_lock lock{s->mutex};
      s->idle = true;
      s->wake.wait(lock, [&] { return s->stopping || !s->queued.empty(); });
      if (s->stopping)
        return;
      s->idle = false;
      next = std::move(s->queued.front());
      s->queued.pop_front();
    }
    // Started only if the consumer has not taken it back: then the gate holds the ticket sent
    // just before this one. A message taken back is dropped unseen.
    auto expected = next.second - 1;
    if (!s->gate->compare_exchange_strong(expected, next.second))
      continue;
    const auto& msg = next.first;
    s->running_task = true;
    // A message that came back from a dead node runs only once its start is written: if its
    // task ends the process again, the attempt counts (see "Poison messages" in the guide).
    if (msg.confirm_start && s->context.cancels) {
      auto verdict =
        s->context.cancels->await_start({msg.id, msg.attempt, msg.claim}, start_confirm_bound);
      {
        std::lock_guard lock{s->mutex};
        if (s->stopping)
          return; // abandoned meanwhile: it starts nothing
      }
      if (verdict == start_verdict::not_ours) {
        // The node no longer holds this delivery (recovered elsewhere, or finished): the task
        // does not run, and the outcome (never started) is refused by the row.
        s->running_task = false;
        log().info("message={} not started queue={}: its delivery is no longer this node's", msg.id,
                   s->context.queue);
        storage::outcome out;
        out.id = msg.id;
        out.attempt = msg.attempt;
        out.state = storage::outcome_state::retry;
        out.ran_ms = -1;
        std::lock_guard guard{s->report_mutex};
        if (!s->report)
          return;
        s->report(std::move(out));
        continue;
      }
      if (verdict == start_verdict::unknown)
        log().warn("message={} starts without its start written queue={}: the write failed", msg.id,
                   s->context.queue);
    }
    // execute() catches everything the task throws: no exception ever leaves it.
    auto handles =
      s->context.cancels ? s->context.cancels->enter(msg.id) : attempt_board::handles{};
    auto out =
      execute(*s->context.registry, msg, s->context.queue, s->context.stopping.get(),
              handles.cancel.get(), handles.progress_of.get(), s->context.coordination.get());
    if (s->context.cancels)
      s->context.cancels->leave(msg.id, handles);
    // The latest progress goes with the outcome, in the same row version, whether or not the
    // consumer took it for a write of its own (which may land after the outcome, and find
    // the row finished).
    if (handles.progress_of)
      out.progress_json = handles.progress_of->latest().value_or(std::string{});
    s->running_task = false;
    std::lock_guard guard{s->report_mutex};
    if (!s->report)
      return; // abandoned while the task ran: its outcome was recorded already
    if (out.state != storage::outcome_state::done)
      log().warn("task failed queue={} message={} task={} attempt={} retry={} error={}",
                 s->context.queue, msg.id, msg.task, msg.attempt,
                 out.state == storage::outcome_state::retry, out.error_json);
    s->report(std::move(out));
  }
}

class thread_executor final : public executor {
public:
  thread_executor(executor_context context, std::shared_ptr<std::atomic<std::uint64_t>> gate,
                  report_outcome report)
      : s_(std::make_shared<shared_state>()) {
    s_->context = std::move(context);
    s_->gate = std::move(gate);
    s_->report = std::move(report);
    thread_ = std::thread([s = s_] { run_loop(s); });
  }

  ~thread_executor() override { abandon(); }

  void run(std::vector<storage::claimed_message> msgs, std::uint64_t first) override {
    {
      std::lock_guard lock{s_->mutex};
      for (auto& m : msgs)
        s_->queued.emplace_back(std::move(m), first++);
    }
    s_->wake.notify_one();
  }

  bool busy() const noexcept override { return s_->running_task.load(); }

  void abandon() noexcept override {
    if (!thread_.joinable())
      return;
    {
      std::lock_guard guard{s_->report_mutex};
      s_->report = nullptr; // releases the consumer's handle too
    }
    bool idle = false;
    {
      std::lock_guard lock{s_->mutex};
      s_->stopping = true;
      s_->queued.clear();
      idle = s_->idle;
    }
    s_->wake.notify_one();
    // An idle thread ends at once: wait for it. One inside task code may take any time: it ends
    // by itself once the task returns.
    if (idle)
      thread_.join();
    else
      thread_.detach();
  }

private:
  std::shared_ptr<shared_state> s_;
  std::thread thread_;
};

} // namespace

executor_factory thread_executors(executor_context context) {
  return [context = std::move(context)](std::shared_ptr<std::atomic<std::uint64_t>> gate,
                                        report_outcome report) -> std::unique_ptr<executor> {
    return std::make_unique<thread_executor>(context, std::move(gate), std::move(report));
  };
}

} // namespace troupe::actors
