// A consumer's executor slots and its ready messages: which claimed message runs where, which
// wait behind a running one, and how messages sent to an executor but not started come back.
// Plain classes, owned by their consumer actor and used only on its thread; no CAF here, so
// their rules are unit-tested on their own (tests/unit/executor_slots_test.cpp).
#pragma once

#include "actors/executor.hpp"
#include "storage/records.hpp"

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <set>
#include <vector>

namespace troupe::actors {

/// Claimed messages not handed to an executor, in the order they start: priority (lower
/// first), then eta, then id, whatever order their claims brought them in.
class ready_queue {
public:
  bool empty() const noexcept { return by_start_.empty(); }
  std::size_t size() const noexcept { return by_start_.size(); }

  void push(storage::claimed_message m) { by_start_.insert(std::move(m)); }
  /// The message that starts next. Only when not empty.
  const storage::claimed_message& front() const { return *by_start_.begin(); }
  storage::claimed_message pop();
  /// Removes the messages of claim `claim`.
  void drop_claim(std::uint64_t claim);
  /// Removes the messages of claim `claim` and returns them.
  std::vector<storage::claimed_message> take_claim(std::uint64_t claim);
  /// Every message, in start order, leaving the queue empty.
  std::vector<storage::claimed_message> take_all();
  /// Removes message `id` and returns it, if it is here.
  std::optional<storage::claimed_message> take(const std::string& id);
  /// Every message's id.
  void ids(std::vector<std::string>& out) const;

  /// Whether `a` starts before `b`.
  static bool before(const storage::claimed_message& a, const storage::claimed_message& b);

private:
  struct order {
    bool operator()(const storage::claimed_message& a, const storage::claimed_message& b) const {
      return before(a, b);
    }
  };
  std::multiset<storage::claimed_message, order> by_start_;
};

/// A consumer's executors, one per slot (its concurrency). A busy executor gets its next
/// messages before it finishes the one it runs (up to `pipeline_depth` queued behind it), so
/// that it goes on from one to the next without waiting for the consumer. What was sent but not
/// started can be taken back: for an idle executor, for a message that should start first, at a
/// stop, when the executor is abandoned.
class executor_slots {
public:
  static constexpr std::size_t pipeline_depth = 16;

  struct sent_message {
    storage::claimed_message message;
    std::uint64_t ticket = 0;
  };

  struct slot {
    std::unique_ptr<executor> runner;
    /// Counts the executors this slot has had: reports of an earlier one are stale.
    std::uint64_t serial = 0;
    std::shared_ptr<std::atomic<std::uint64_t>> gate;
    std::uint64_t last_ticket = 0; // the last one sent, or the gate after a take-back
    std::optional<storage::claimed_message> running;
    std::uint64_t running_ticket = 0;
    std::deque<sent_message> queued; // sent behind the running one, in order
    // Assigned by the dispatch at hand, sent to the executor in one run() when it ends.
    std::vector<storage::claimed_message> outbox;
    std::uint64_t outbox_first = 0; // the ticket of the outbox's first message
    // When the running attempt is abandoned: its time limit plus the grace.
    std::chrono::steady_clock::time_point deadline;
    // When the running attempt started, and whether its start was written to its row.
    std::chrono::steady_clock::time_point started;
    bool start_written = false;
    // When this slot's pending limit timer fires, if one is pending: one timer per slot, not
    // one per attempt (a delayed message cannot be cancelled in CAF 0.17).
    std::optional<std::chrono::steady_clock::time_point> timer_due;
  };

  /// `count` slots, each with an executor from `make`: (gate, slot index, serial) → executor.
  using make_executor = std::function<std::unique_ptr<executor>(
    std::shared_ptr<std::atomic<std::uint64_t>> gate, std::size_t index, std::uint64_t serial)>;
  executor_slots(std::size_t count, make_executor make);
  ~executor_slots();

  std::size_t size() const noexcept { return slots_.size(); }
  slot& operator[](std::size_t i) { return slots_[i]; }
  const slot& operator[](std::size_t i) const { return slots_[i]; }

  /// Slots whose executor runs a message (or was sent one to run now).
  std::int32_t running() const noexcept { return running_; }
  /// Messages sent to executors behind their running ones.
  std::int32_t queued() const noexcept;

  /// Hands ready messages to executors. First a busy slot gives back what it was sent but has
  /// not started when a ready message should start before it; then idle executors get one each,
  /// then busy ones one behind each, a level at a time (`pipelining`: up to pipeline_depth), so
  /// that a burst is spread evenly and starts in start order; then an executor left idle takes
  /// over what is queued, unstarted, behind a busy one. Returns the slots that got a message
  /// to run now (their deadline is to be set). Nothing is sent until flush().
  std::vector<std::size_t> assign(ready_queue& ready, bool pipelining);
  /// Sends each slot's outbox to its executor in one run().
  void flush();

  /// What slot `i` was sent and has not started comes back to `ready`, and the executor will
  /// drop it unseen; a started message stays with the slot.
  void take_back(std::size_t i, ready_queue& ready);
  /// The same for every slot.
  void take_back_all(ready_queue& ready);

  /// The running message of slot `i` is settled (its outcome known): the slot forgets it, and
  /// what was queued behind it, if any, runs now (returns whether something does).
  storage::claimed_message finish_running(std::size_t i);
  bool promote(std::size_t i);

  /// Gives slot `i` a new executor (the old one was abandoned, and is returned to the caller,
  /// who keeps it while its task runs): its queued messages must be settled or taken back first.
  std::unique_ptr<executor> replace(std::size_t i);

  /// Every id held by a slot (running or queued).
  void ids(std::vector<std::string>& out) const;
  /// Whether a slot holds a message of claim `claim`.
  bool holds_claim(std::uint64_t claim) const;
  /// Every message of claim `claim` a slot holds (running, or queued and maybe started).
  std::vector<storage::claimed_message> of_claim(std::uint64_t claim) const;

private:
  std::uint64_t put_in_outbox(slot& s, const storage::claimed_message& m);
  void start_running(slot& s, storage::claimed_message m, std::uint64_t ticket);
  void fill_idle(ready_queue& ready, std::vector<std::size_t>& started);

  std::vector<slot> slots_;
  make_executor make_;
  std::int32_t running_ = 0;
};

} // namespace troupe::actors
