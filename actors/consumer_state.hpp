// The consumer's state and the functions its two source files share: consumer.cpp (the
// behavior, dispatching, outcomes, time limits) and consumer_claims.cpp (claims, the eta probe,
// the recovery after a failed claim, hand-backs). Internal to the consumer.
#pragma once

#include "actors/claim_tracker.hpp"
#include "actors/consumer.hpp"
#include "actors/executor_slots.hpp"

#include <chrono>
#include <optional>
#include <random>

namespace troupe::actors::detail {

/// Owned by the consumer actor; used only on its thread.
struct consumer_state {
  static inline const char* name = "troupe.consumer";
  consumer_settings settings;
  std::optional<executor_slots> slots; // built once the actor exists: executors report to it
  ready_queue ready;                   // claimed, not handed to an executor
  claim_tracker claims;
  bool stopping = false;
  bool lock_held = true;     // the node holds its liveness lock: claims and starts are allowed
  bool paused = false;       // the queue is paused: nothing is claimed or started
  bool starts_timer = false; // a starts_atom is on its way
  // Starts to write before their tasks run whose claim is not committed yet (the rows are not
  // running yet), and whether a confirm_start_atom to try them again is on its way.
  std::vector<start_request> parked_starts;
  bool confirm_timer = false;
  // The cancel requests its executors' tasks read, and the progress they report (built with
  // the actor, which it tells when progress waits).
  std::shared_ptr<attempt_board> cancels;
  // The messages of a claim whose commit is unknown that never started: the recovery locks
  // them too, so that it waits for that claim's transaction to end.
  std::vector<storage::claimed_message> uncertain_unstarted;
  std::optional<caf::typed_response_promise<consumer_report>> stop_promise;
  std::int32_t releasing = 0;                                    // hand-back requests in flight
  std::optional<std::chrono::steady_clock::time_point> eta_wake; // earliest scheduled eta wake
  std::int64_t executed = 0;
  std::int64_t released = 0;
  std::minstd_rand rng{std::random_device{}()};
  // Turns true when the node stops; executors hand it to tasks (shutdown notifications).
  std::shared_ptr<std::atomic<bool>> stopping_flag = std::make_shared<std::atomic<bool>>(false);
  // Executors abandoned past a time limit, kept while their task has not returned.
  std::vector<std::unique_ptr<executor>> abandoned;

  std::int32_t capacity() const { return settings.queue.concurrency + settings.queue.prefetch; }
  std::int32_t held() const {
    return slots->running() + slots->queued() + static_cast<std::int32_t>(ready.size()) +
           claims.rows_in_flight();
  }
  std::int32_t free_slots() const {
    return capacity() - held() - std::max(0, claims.unsettled() - capacity());
  }
  std::chrono::milliseconds jittered(std::chrono::milliseconds base) {
    auto spread = base.count() / 10;
    if (spread <= 0)
      return base;
    std::uniform_int_distribution<long> d(-spread, spread);
    return base + std::chrono::milliseconds{d(rng)};
  }
  // What it runs and holds ready now, for the metrics (a gauge as of its latest event).
  void note_load() const {
    if (settings.metrics)
      settings.metrics->set_load(settings.metrics_queue, slots->running(),
                                 slots->queued() + static_cast<std::int64_t>(ready.size()));
  }
  consumer_report report() {
    std::erase_if(abandoned, [](const std::unique_ptr<executor>& e) { return !e->busy(); });
    return consumer_report{settings.queue.name, executed, released, slots->running(),
                           static_cast<std::int64_t>(abandoned.size())};
  }
};

using consumer_ptr = consumer_actor::stateful_pointer<consumer_state>;

// consumer.cpp
bool idle_now(const consumer_state& st);
/// Whether messages may start now: the node holds its lock and the queue is not paused.
inline bool may_start(const consumer_state& st) {
  return st.lock_held && !st.paused;
}
void finish_stop_if_idle(consumer_ptr self);
void schedule_wake(consumer_ptr self, std::chrono::milliseconds after);
void dispatch(consumer_ptr self);
void send_outcome(consumer_ptr self, storage::outcome out);

// consumer_operations.cpp
void on_pause(consumer_ptr self, bool paused);
void on_cancels(consumer_ptr self, const std::vector<std::string>& ids);
/// A task reported progress where none waited: the next starts write takes it.
void on_progress(consumer_ptr self);
void write_starts(consumer_ptr self);
/// Executors wait for the starts of messages that came back from a dead node: writes them.
void confirm_starts(consumer_ptr self);
void arm_starts_timer(consumer_ptr self);

// consumer_claims.cpp
void maybe_claim(consumer_ptr self);
void on_locked(consumer_ptr self, std::uint64_t claim, std::vector<storage::claimed_message>& msgs);
void release_ready(consumer_ptr self);
void send_held_outcomes(consumer_ptr self);

} // namespace troupe::actors::detail
