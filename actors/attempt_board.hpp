// What a consumer and the tasks its executors run tell each other while an attempt runs:
// whether its cancel was requested (consumer to task), and the progress it reports (task to
// consumer). Plain C++, shared by the consumer (its actor thread) and its executors (their
// threads), under one mutex.
//
// The consumer requests a cancel of a message id; an executor that starts that message gets a
// flag that is already set, and one that runs it has its flag set now. The task reads the flag
// through its task_context (cancel_requested(), check()). Ids are forgotten when the message's
// attempt is settled, or when the consumer cancels it before it started.
//
// Progress is coalesced: a task's set_progress() keeps only the latest value, and tells the
// consumer (through `on_progress`) only when a value waits where none did; the consumer takes
// the latest value of each running attempt when it writes, once a second at most.
//
// Starts to confirm: an executor that starts a message which came back from a dead node
// (claimed_message::confirm_start) asks for its start to be written first and waits; the
// consumer (told through `on_start`) takes the requests, writes them, and settles each.
#pragma once

#include "troupe/task.hpp"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace troupe::actors {

/// The latest progress of one attempt, not yet written.
class progress_cell final : public progress_sink {
public:
  explicit progress_cell(std::function<void()> on_first) : on_first_(std::move(on_first)) {}

  void report(std::string json) noexcept override {
    bool first = false;
    {
      std::lock_guard lock{mutex_};
      latest_ = std::move(json);
      first = !waiting_;
      waiting_ = true;
    }
    try {
      if (first && on_first_)
        on_first_();
    } catch (...) { // out of memory: the next report, or the outcome, carries it
    }
  }
  /// The latest value reported, taken or not (what the outcome carries: a write the consumer
  /// took may land after the outcome, and find the row finished).
  std::optional<std::string> latest() {
    std::lock_guard lock{mutex_};
    if (latest_.empty())
      return std::nullopt;
    return latest_;
  }
  /// The value that waits, if any; none waits after.
  std::optional<std::string> take() {
    std::lock_guard lock{mutex_};
    if (!waiting_)
      return std::nullopt;
    waiting_ = false;
    return latest_;
  }

private:
  std::mutex mutex_;
  std::string latest_;
  bool waiting_ = false;
  std::function<void()> on_first_;
};

/// How the write of a start that an executor waits for ended.
enum class start_verdict {
  written,  ///< the row says started: the task runs
  not_ours, ///< the node no longer holds that delivery: the task does not run
  unknown   ///< the write failed or took too long: the task runs, its start comes with its outcome
};

/// A start to write before its task runs.
struct start_request {
  std::string id;
  std::int32_t attempt = 0;
  std::uint64_t claim = 0;
};

class attempt_board {
public:
  using flag = std::shared_ptr<std::atomic<bool>>;
  using progress = std::shared_ptr<progress_cell>;

  /// What an executor hands its task for one attempt.
  struct handles {
    flag cancel;
    progress progress_of;
  };

  /// `on_progress` runs on the task's thread when an attempt's progress starts waiting, and
  /// `on_start` when an executor asks for a start to be written (await_start).
  explicit attempt_board(std::function<void()> on_progress = {},
                         std::function<void()> on_start = {})
      : on_progress_(std::move(on_progress)), on_start_(std::move(on_start)) {}

  /// The cancel of `id` is requested: its running attempt (if any) sees it now, one that starts
  /// later sees it from its start.
  void request(const std::string& id) {
    std::lock_guard lock{mutex_};
    requested_.insert(id);
    if (auto i = running_.find(id); i != running_.end())
      i->second.cancel->store(true);
  }
  /// An executor starts `id`: its flag (set when the cancel was requested already) and where
  /// its progress goes.
  handles enter(const std::string& id) {
    handles h{std::make_shared<std::atomic<bool>>(false),
              std::make_shared<progress_cell>(on_progress_)};
    std::lock_guard lock{mutex_};
    if (requested_.contains(id))
      h.cancel->store(true);
    running_[id] = h;
    return h;
  }
  /// The executor's attempt of `id` ended (`h` is what its enter() gave: an abandoned
  /// executor's late leave must not remove a later attempt's entry).
  void leave(const std::string& id, const handles& h) {
    std::lock_guard lock{mutex_};
    if (auto i = running_.find(id); i != running_.end() && i->second.cancel == h.cancel)
      running_.erase(i);
  }
  /// The consumer is done with `id` (settled, or cancelled before it started).
  void forget(const std::string& id) {
    std::lock_guard lock{mutex_};
    requested_.erase(id);
  }
  bool requested(const std::string& id) const {
    std::lock_guard lock{mutex_};
    return requested_.contains(id);
  }
  /// The progress of `id`'s running attempt that waits to be written, if any.
  std::optional<std::string> take_progress(const std::string& id) {
    progress cell;
    {
      std::lock_guard lock{mutex_};
      auto i = running_.find(id);
      if (i == running_.end())
        return std::nullopt;
      cell = i->second.progress_of;
    }
    return cell->take();
  }

  // -- starts written before their task runs ------------------------------------------------

  /// On the executor's thread: asks for the start of `r` to be written and waits for the
  /// consumer's verdict, at most `bound` (then: unknown).
  start_verdict await_start(const start_request& r, std::chrono::milliseconds bound) {
    {
      std::lock_guard lock{mutex_};
      starts_[r.id] = pending_start{r, false, std::nullopt};
    }
    try {
      if (on_start_)
        on_start_();
    } catch (...) { // out of memory: the wait below ends at its bound
    }
    std::unique_lock lock{mutex_};
    start_settled_.wait_for(lock, bound, [&] {
      auto i = starts_.find(r.id);
      return i == starts_.end() || i->second.verdict.has_value();
    });
    auto verdict = start_verdict::unknown;
    if (auto i = starts_.find(r.id); i != starts_.end()) {
      verdict = i->second.verdict.value_or(start_verdict::unknown);
      starts_.erase(i);
    }
    return verdict;
  }
  /// On the consumer's thread: the starts asked for since the last call.
  std::vector<start_request> take_start_requests() {
    std::vector<start_request> out;
    std::lock_guard lock{mutex_};
    for (auto& [id, p] : starts_)
      if (!p.taken && !p.verdict) {
        p.taken = true;
        out.push_back(p.request);
      }
    return out;
  }
  /// On the consumer's thread: the start of `r` was written (or not): its executor goes on.
  void settle_start(const start_request& r, start_verdict v) {
    {
      std::lock_guard lock{mutex_};
      auto i = starts_.find(r.id);
      if (i == starts_.end() || i->second.request.attempt != r.attempt || i->second.verdict)
        return;
      i->second.verdict = v;
    }
    start_settled_.notify_all();
  }

private:
  struct pending_start {
    start_request request;
    bool taken = false; // the consumer is writing it
    std::optional<start_verdict> verdict;
  };

  mutable std::mutex mutex_;
  std::function<void()> on_progress_;
  std::function<void()> on_start_;
  std::unordered_set<std::string> requested_;
  std::unordered_map<std::string, handles> running_;
  std::unordered_map<std::string, pending_start> starts_;
  std::condition_variable start_settled_;
};

} // namespace troupe::actors
