// Where a consumer tells its running tasks that their cancel was requested. Plain C++, shared
// by the consumer (its actor thread) and its executors (their threads), under one mutex.
//
// The consumer requests a cancel of a message id; an executor that starts that message gets a
// flag that is already set, and one that runs it has its flag set now. The task reads the flag
// through its task_context (cancel_requested(), check()). Ids are forgotten when the message's
// attempt is settled, or when the consumer cancels it before it started.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <unordered_set>

namespace troupe::actors {

class cancel_board {
public:
  using flag = std::shared_ptr<std::atomic<bool>>;

  /// The cancel of `id` is requested: its running attempt (if any) sees it now, one that starts
  /// later sees it from its start.
  void request(const std::string& id) {
    std::lock_guard lock{mutex_};
    requested_.insert(id);
    if (auto i = running_.find(id); i != running_.end())
      i->second->store(true);
  }
  /// An executor starts `id`: its flag, set when the cancel was requested already.
  flag enter(const std::string& id) {
    auto f = std::make_shared<std::atomic<bool>>(false);
    std::lock_guard lock{mutex_};
    if (requested_.contains(id))
      f->store(true);
    running_[id] = f;
    return f;
  }
  /// The executor's attempt of `id` ended (`f` is the flag its enter() gave: an abandoned
  /// executor's late leave must not remove a later attempt's entry).
  void leave(const std::string& id, const flag& f) {
    std::lock_guard lock{mutex_};
    if (auto i = running_.find(id); i != running_.end() && i->second == f)
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

private:
  mutable std::mutex mutex_;
  std::unordered_set<std::string> requested_;
  std::unordered_map<std::string, flag> running_;
};

} // namespace troupe::actors
