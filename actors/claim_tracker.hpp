// The claim side of a consumer: whether a claim is in flight and what it asked for, whether
// the queue may hold more ready messages, when the next delayed message is due, the outcomes
// that must wait for their claim to be written, and the recovery after a claim that failed. A
// plain class, owned by its consumer actor and used only on its thread; no CAF and no I/O:
// the consumer asks it what to do, does it, and tells it what happened
// (tests/unit/claim_tracker_test.cpp).
//
// A claim runs in two steps (storage::claim_batch_early): its messages come as soon as their
// rows are locked, and start at once; the rows are marked running and committed after that,
// and the reply comes last. A completion written before the commit would be refused, so the
// outcomes of that claim's messages are held until its reply.
//
//                  begin()                  locked()
//      ┌──────┐ ──────────────▶ ┌──────────┐ ───────▶ ┌────────┐
//      │ idle │                 │ claiming │          │ locked │   (its outcomes are held)
//      └──────┘ ◀────────────── └──────────┘ ◀─────── └────────┘
//        ▲ ▲     succeeded()         │ failed()         │ succeeded(): held outcomes go
//        │ │                         ▼                  │ failed()
//        │ │              ┌──────────────┐ ◀────────────┘
//        │ │              │ must_recover │ ◀──────────────┐ recovery_failed()
//        │ │              └──────────────┘                │   (after a backoff)
//        │ │                 │ begin_recovery()           │
//        │ │                 ▼                            │
//        │ │              ┌────────────┐ ─────────────────┘
//        │ └───────────── │ recovering │
//        │ recovery_done()└────────────┘
//        │
//   a consumer that replaces a dead one starts in must_recover: before it claims anything it
//   hands back what the node holds of its queue and it does not (storage::recover_unheld).
//
// A failed claim may have committed before its reply was lost, and its rows would then stay
// this node's and never run: the recovery hands back every row the node owns in the queue
// except those the consumer holds, after the batcher has written every outcome sent so far.
// When the database refused the claim for sure, it was rolled back, and the outcome of a
// started message of it is dropped: written, it could pass for the outcome of a later
// delivery of the same row with the same token. When the claim's commit is unknown (the
// connection broke), its outcomes stay held through the recovery, which first asks which of
// its started messages the claim did commit (storage::recover_unheld): only those outcomes
// are written; the others are dropped, now or when their attempts end (void).
#pragma once

#include "storage/records.hpp"

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace troupe::actors {

class claim_tracker {
public:
  enum class phase { idle, claiming, locked, must_recover, recovering };

  /// `recover_first`: start in must_recover (a replacement consumer).
  explicit claim_tracker(bool recover_first = false);

  phase state() const noexcept { return phase_; }
  /// Whether a claim is in flight (claiming or locked).
  bool in_flight() const noexcept { return phase_ == phase::claiming || phase_ == phase::locked; }
  /// The number of the claim in flight, or of the last one.
  std::uint64_t current() const noexcept { return claims_; }

  // -- deciding and claiming -------------------------------------------------------------

  /// How many rows to claim now: none unless idle, something may have brought rows, and at
  /// least half the capacity is free (or the executors are about to run dry: nothing ready).
  /// Batches stay large under load and latency stays low when idle.
  std::int32_t rows_to_claim(std::int32_t free, std::int32_t capacity, bool ready_waiting) const;
  /// A claim of `rows` rows begins; returns its number.
  std::uint64_t begin(std::int32_t rows);
  /// Rows asked for by the claim in flight that have not arrived yet (they take free slots).
  std::int32_t rows_in_flight() const noexcept { return phase_ == phase::claiming ? rows_ : 0; }
  /// The messages of claim `claim` came locked: false when that is not the claim in flight
  /// (it was given up, and the recovery after it hands back whatever it took).
  bool locked(std::uint64_t claim, std::size_t count);

  /// What a claim brought, once its reply came.
  struct claim_end {
    /// Messages in all (early and in the reply).
    std::size_t got = 0;
    /// Whether the queue may hold more ready messages: the claim came back full, or something
    /// may have brought rows while it was in flight (it may have looked before they
    /// committed).
    bool more = false;
  };
  /// The claim's reply came, with `in_reply` more messages.
  claim_end succeeded(std::size_t in_reply);

  /// Why a claim failed.
  enum class failure {
    /// The database refused it: it was rolled back.
    rolled_back,
    /// The connection was lost or the reply did not come: it may have committed.
    unknown,
  };
  /// The claim failed: the backoff grows, a recovery is due, and (when it was rolled back for
  /// sure) its held outcomes are dropped, returning how many.
  std::size_t failed(failure why);

  // -- outcomes held for a claim not written yet -----------------------------------------

  /// Whether the outcome of a message of claim `claim` must wait for the claim's reply.
  bool must_hold(std::uint64_t claim) const noexcept {
    return (phase_ == phase::locked && claim == claims_) || (uncertain_ && claim == *uncertain_);
  }
  void hold(storage::outcome out) { held_.push_back(std::move(out)); }
  /// The held outcomes, to be sent now (after succeeded() or failed()); none while the claim
  /// they wait for is uncertain.
  std::vector<storage::outcome> take_held();

  // -- a claim whose commit is unknown ----------------------------------------------------

  /// The claim that failed with its commit unknown after its messages had started, until the
  /// recovery resolves it.
  std::optional<std::uint64_t> uncertain() const noexcept { return uncertain_; }
  /// The held outcomes' ids and attempts (of the uncertain claim's finished messages).
  std::vector<std::pair<std::string, std::int32_t>> held_attempts() const;
  /// The recovery found which of the uncertain claim's started messages it committed: returns
  /// the held outcomes of those, to be sent; the others are dropped, and the messages in
  /// `running` (still running) that it did not commit are void: their outcomes will be dropped.
  std::vector<storage::outcome> resolve_uncertain(const std::vector<std::string>& committed,
                                                  const std::vector<std::string>& running);
  /// The attempt of message `id` delivered by claim `claim` is void: its delivery was taken
  /// from the node (declared dead), and its outcome must be dropped.
  void make_void(std::uint64_t claim, const std::string& id) { void_.emplace(claim, id); }
  /// Whether the outcome of message `id` delivered by claim `claim` is void (that claim never
  /// committed; a later claim may deliver the same message again); forgets it.
  bool take_void(std::uint64_t claim, const std::string& id);
  /// Whether claim `claim` was rolled back for sure (see failed()): its outcomes are dropped.
  bool rolled_back(std::uint64_t claim) const { return rolled_back_.contains(claim); }
  /// Forgets rolled-back claims none of whose messages run any more.
  void forget_rolled_back(const std::function<bool(std::uint64_t)>& still_held);

  // -- what may be ready -----------------------------------------------------------------

  /// Something may have brought ready or delayed rows: a notification, the poll, the eta
  /// timer, a retry written by the batcher.
  void something_changed();
  /// Whether the queue may hold ready rows this consumer has not claimed. Set by
  /// something_changed() and by a full claim, cleared by a claim that came back short.
  /// Finished executors claim again only while it is set, so a node keeping up with its
  /// producer asks once per notification instead of once each time its executors run dry.
  bool maybe_more() const noexcept { return maybe_more_; }
  /// A probe found nothing due later: a row that came due between the last claim and the
  /// probe is ready now, and only a claim finds it. Unlike something_changed(), the eta stays
  /// known, so the claim that follows (empty or not) is not followed by another probe.
  void may_have_come_due() noexcept { maybe_more_ = true; }

  // -- when the next delayed message is due ----------------------------------------------

  /// Counts what may have added a delayed message (every wake: a notification does not say
  /// whether its messages are delayed).
  std::int64_t generation() const noexcept { return generation_; }
  /// An answer about the next eta covering `generation` came.
  void eta_known(std::int64_t generation);
  /// Whether to ask for the next eta apart from any claim (an eta probe) now: the last answer
  /// may be stale, no probe is in flight, and no claim will follow anyway (nothing more may
  /// be ready). A claim that takes everything ready leaves no finished task to claim again.
  bool should_probe() const noexcept;
  /// A probe begins (returns the generation it covers) or ends.
  std::int64_t begin_probe();
  void end_probe() noexcept { probing_ = false; }
  /// The probe failed at `now`: no probe before a backoff that grows like the claim's (100 ms
  /// doubling up to 5 s), so that a probe that keeps failing is logged once per step. A probe
  /// that succeeds resets it.
  void probe_failed(std::chrono::steady_clock::time_point now) noexcept;
  void probe_succeeded() noexcept { probe_backoff_ = std::chrono::milliseconds{0}; }
  std::chrono::milliseconds probe_backoff() const noexcept { return probe_backoff_; }
  /// How long the next probe must still wait at `now`; 0 when it need not.
  std::chrono::milliseconds probe_held_off_for(std::chrono::steady_clock::time_point now) const;

  // -- the recovery after a failed claim -------------------------------------------------

  void begin_recovery();
  /// The ids of outcomes settled while recovering: they are finished, not lost, and must not be
  /// handed back as claimed-but-unheld.
  void settled_during_recovery(const std::string& id);
  const std::vector<std::string>& completed_during_recovery() const noexcept { return completed_; }
  void recovery_done();
  void recovery_failed();
  /// How long to wait before the next claim or recovery after a failure (0 after a success).
  std::chrono::milliseconds backoff() const noexcept { return backoff_; }
  /// The backoff starts now (`now`, the caller's clock): until it has passed, no claim and no
  /// recovery begins, whatever wakes the consumer (a notification, the poll, an earlier timer).
  void hold_off(std::chrono::steady_clock::time_point now) noexcept { resume_at_ = now + backoff_; }
  /// How long the consumer must still wait at `now` before it claims or recovers; 0 when it
  /// need not.
  std::chrono::milliseconds held_off_for(std::chrono::steady_clock::time_point now) const noexcept;

  // -- outcomes the batcher has not settled -----------------------------------------------

  /// An attempt's outcome is known; it goes to the batcher now or once its claim is written.
  void outcome_pending() noexcept { ++unsettled_; }
  /// An outcome went to the batcher (retry: whether it puts its message back in the queue).
  void outcome_sent(bool retry);
  /// The batcher settled `count` more (in the order it got them). Returns whether a retry
  /// among them is written: its row is queued again, with an eta.
  bool outcomes_settled(std::int64_t count);
  /// Outcomes pending and not settled yet. Up to one capacity of them is the normal pipeline
  /// (a write in flight while the executors go on); beyond that they take slots, so a node
  /// never finishes tasks much faster than it can record them and its memory stays bounded.
  std::int32_t unsettled() const noexcept { return unsettled_; }

private:
  void grow_backoff() noexcept;

  phase phase_;
  std::uint64_t claims_ = 0; // claims begun so far: the number of the one in flight
  std::int32_t rows_ = 0;    // rows asked for by the claim in flight, until they arrive
  std::int32_t asked_ = 0;   // rows asked for by the claim in flight
  std::size_t early_ = 0;    // messages of the claim in flight that came before its reply
  bool woken_ = false;       // something_changed() while a claim was in flight
  bool maybe_more_ = true;
  std::vector<storage::outcome> held_;
  std::set<std::uint64_t> rolled_back_;
  std::optional<std::uint64_t> uncertain_;
  std::set<std::pair<std::uint64_t, std::string>> void_;
  std::int64_t generation_ = 1;
  std::int64_t eta_known_for_ = 0;
  bool probing_ = false;
  std::chrono::milliseconds probe_backoff_{0};
  std::chrono::steady_clock::time_point probe_resume_at_{};
  std::vector<std::string> completed_;
  std::chrono::milliseconds backoff_{0};
  std::chrono::steady_clock::time_point resume_at_{};
  std::int64_t sent_ = 0;
  std::int64_t settled_ = 0;
  std::deque<std::int64_t> retries_; // the numbers of the retries sent and not settled
  std::int32_t unsettled_ = 0;
};

} // namespace troupe::actors
