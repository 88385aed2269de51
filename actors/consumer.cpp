#include "actors/consumer.hpp"

#include "actors/execute.hpp"
#include "troupe/log.hpp"

#include <deque>
#include <optional>
#include <random>
#include <set>
#include <utility>

namespace troupe::actors {

namespace {

using namespace std::chrono;

// Each busy executor gets its next messages before it finishes the one it runs (up to
// `pipeline_depth` queued behind it), so that it goes on from one to the next without waiting
// for the consumer, and without a thread wake-up. A message sent but not started can be taken
// back (for an idle executor, at a stop, when the executor is abandoned or dies). Tickets
// count up per slot, one per message sent; the executor starts a message only by moving the
// slot's gate from the ticket before it to its own. Taking back moves the gate one past the
// last ticket sent, which no message already sent can match; the gate's old value says which
// were started (every ticket up to it), and those stay with the slot. 64-bit tickets never
// wrap.
constexpr std::size_t pipeline_depth = 16;

struct sent_message {
  storage::claimed_message message;
  std::uint64_t ticket = 0;
};

struct slot {
  executor_actor executor;
  std::shared_ptr<std::atomic<std::uint64_t>> gate;
  std::uint64_t last_ticket = 0; // the last one sent, or the gate after a take-back
  std::optional<storage::claimed_message> running;
  std::uint64_t running_ticket = 0;
  std::deque<sent_message> queued; // sent behind the running one, in order
  // Assigned by the dispatch at hand, sent to the executor in one message when it ends.
  std::vector<storage::claimed_message> outbox;
  std::uint64_t outbox_first = 0; // the ticket of the outbox's first message
  // When the running attempt is abandoned: its time limit plus the grace.
  steady_clock::time_point deadline;
  // When this slot's pending limit timer fires, if one is pending. One timer per slot, not one
  // per attempt: a delayed message cannot be cancelled in CAF 0.17, and one per attempt kept
  // every finished attempt's timer (10 minutes by default) in memory.
  std::optional<steady_clock::time_point> timer_due;
};

struct consumer_state {
  static inline const char* name = "troupe.consumer";
  consumer_settings settings;
  std::vector<slot> slots;
  std::deque<storage::claimed_message> ready; // claimed, not started
  std::int32_t running = 0;
  std::uint64_t claims = 0;       // claims asked for so far: the number of the one in flight
  bool claim_in_flight = false;   // until its reply
  std::int32_t claiming = 0;      // rows asked for by the claim in flight, until they arrive
  std::int32_t claimed_early = 0; // messages of the claim in flight that came before its reply
  // A claim's messages come as soon as their rows are locked, and start at once; the rows are
  // marked running and committed after that, and a completion written before then would be
  // refused. So the outcomes of that claim's messages wait here until its reply says it is
  // written (unwritten_claim is its number; 0 when none is pending).
  std::uint64_t unwritten_claim = 0;
  std::vector<storage::outcome> held_outcomes;
  // Claims that failed after their messages came and were rolled back for sure (the database
  // refused them; not a lost connection). Their rows stay queued with their attempt unchanged,
  // so the outcome of a started message of theirs is dropped: written, it could pass for the
  // outcome of a later delivery of the same row with the same token.
  std::set<std::uint64_t> rolled_back;
  // Something that may bring rows (a notification, the eta timer, the poll, a written retry)
  // came while a claim was in flight: that claim may have run before the new rows committed
  // (or came due), so another one follows it.
  bool wake_during_claim = false;
  // Whether the queue may hold ready rows this consumer has not claimed: set by whatever can
  // bring them (a notification, the eta timer, the poll, a full claim, a retry written by the
  // batcher), cleared by a claim that came back short. Executors that finish claim again only
  // while it is set, so a node keeping up with its producer asks once per notification instead
  // of once more each time its executors run dry.
  bool maybe_more = true;
  // Whether something may have added a delayed message since the last next_eta answer (every
  // wake counts: a notification does not say whether its messages are delayed). A claim that
  // takes everything ready leaves no finished task to claim again, so the consumer then asks
  // for the eta on its own (an eta probe) while the executors work.
  std::int64_t eta_generation = 1; // bumped by every such event
  std::int64_t eta_known_for = 0;  // the generation the last next_eta answer covers
  bool probing = false;            // an eta probe is in flight
  // Retries handed to the batcher, by their number among this consumer's outcomes: once one
  // is written, its row is queued again (with an eta), and a claim looks for it.
  std::int64_t outcomes_sent = 0;
  std::int64_t outcomes_settled = 0;
  std::deque<std::int64_t> retries_unsettled;
  std::int32_t releasing = 0; // hand-back requests in flight
  // After a failed claim: no claims until the rows it may have taken are handed back.
  bool needs_recovery = false; // a failed claim has not been cleaned up yet
  bool recovering = false;     // the clean-up is under way
  std::vector<std::string> completed_during_recovery;
  bool stopping = false;
  std::optional<caf::typed_response_promise<consumer_report>> stop_promise;
  std::optional<steady_clock::time_point> eta_wake; // earliest scheduled eta wake
  milliseconds retry_backoff{0};
  std::int64_t executed = 0;
  std::int64_t released = 0;
  std::minstd_rand rng{std::random_device{}()};
  // Turns true when the node stops; executors hand it to tasks (shutdown notifications).
  std::shared_ptr<std::atomic<bool>> stopping_flag = std::make_shared<std::atomic<bool>>(false);
  // Executors replaced past a time limit whose task has not returned yet.
  std::set<caf::actor_addr> abandoned;

  std::int32_t capacity() const { return settings.queue.concurrency + settings.queue.prefetch; }
  // Messages sent to executors behind their running ones.
  std::int32_t queued() const {
    std::size_t n = 0;
    for (const auto& s : slots)
      n += s.queued.size();
    return static_cast<std::int32_t>(n);
  }
  std::int32_t held() const {
    return running + queued() + static_cast<std::int32_t>(ready.size()) + claiming;
  }
  // Outcomes handed to the completion batcher and not yet written. Up to one capacity of them
  // is the normal pipeline (a write in flight while the executors go on); beyond that they
  // take slots, so a node never finishes tasks much faster than it can record them and its
  // memory stays bounded.
  std::int32_t unsettled = 0;
  std::int32_t free_slots() const {
    return capacity() - held() - std::max(0, unsettled - capacity());
  }

  milliseconds jittered(milliseconds base) {
    auto spread = base.count() / 10;
    if (spread <= 0)
      return base;
    std::uniform_int_distribution<long> d(-spread, spread);
    return base + milliseconds{d(rng)};
  }

  consumer_report report() const {
    consumer_report r{settings.queue.name,
                      executed,
                      released,
                      running,
                      static_cast<std::int64_t>(abandoned.size()),
                      {}};
    for (const auto& s : slots)
      r.executors.push_back(caf::actor_cast<caf::actor>(s.executor));
    return r;
  }
};

using consumer_ptr = consumer_actor::stateful_pointer<consumer_state>;

void dispatch(consumer_ptr self);
void maybe_claim(consumer_ptr self);
void release_ready(consumer_ptr self);
void recover_after_failed_claim(consumer_ptr self);
void send_held_outcomes(consumer_ptr self);
void drop_unstarted_of_claim(consumer_ptr self, std::uint64_t claim);

void finish_stop_if_idle(consumer_ptr self) {
  auto& st = self->state;
  if (!st.stopping || st.running > 0 || st.queued() > 0 || st.claim_in_flight || st.releasing > 0 ||
      st.recovering || !st.ready.empty() || !st.stop_promise)
    return;
  st.stop_promise->deliver(st.report());
  st.stop_promise.reset();
}

void schedule_wake(consumer_ptr self, milliseconds after) {
  auto& st = self->state;
  auto due = steady_clock::now() + after;
  if (st.eta_wake && *st.eta_wake <= due)
    return; // an earlier wake is already on its way
  st.eta_wake = due;
  self->delayed_send(self, after, eta_atom_v);
}

// Something may have brought ready or delayed rows.
void eta_may_change(consumer_ptr self) {
  auto& st = self->state;
  st.maybe_more = true;
  ++st.eta_generation;
  if (st.claim_in_flight)
    st.wake_during_claim = true;
}

void on_eta(consumer_ptr self, std::int64_t generation, std::int64_t next_eta_ms) {
  auto& st = self->state;
  st.eta_known_for = std::max(st.eta_known_for, generation);
  if (next_eta_ms >= 0)
    schedule_wake(self, milliseconds{next_eta_ms + 1});
}

// Asks when the next delayed message is due, apart from any claim, if the last answer may be
// stale. Only after a claim that found nothing more ready (otherwise a claim follows anyway).
void maybe_probe_eta(consumer_ptr self) {
  auto& st = self->state;
  if (st.probing || st.stopping || st.maybe_more || st.eta_known_for >= st.eta_generation)
    return;
  st.probing = true;
  auto generation = st.eta_generation;
  self
    ->request(st.settings.storage, seconds(30), claim_atom_v, st.settings.queue.name,
              st.settings.node_id, std::int32_t{0}, std::int32_t{1})
    .then(
      [=](storage::claim_result& res) {
        self->state.probing = false;
        on_eta(self, generation, res.next_eta_ms);
        maybe_probe_eta(self); // a wake during the probe may have made it stale again
      },
      [=](caf::error& err) {
        auto& s = self->state;
        s.probing = false;
        log().warn("next_eta failed queue={} error={}; the poll looks again", s.settings.queue.name,
                   describe(err));
      });
}

// The messages of claim `claim` came locked, before its reply: they start now.
void on_locked(consumer_ptr self, std::uint64_t claim,
               std::vector<storage::claimed_message>& msgs) {
  auto& st = self->state;
  if (!st.claim_in_flight || claim != st.claims) {
    // A claim whose request was given up (it timed out): the recovery after it hands back
    // whatever it took.
    log().warn("ignoring {} messages of a claim given up queue={}", msgs.size(),
               st.settings.queue.name);
    return;
  }
  st.unwritten_claim = claim;
  st.claiming = 0;
  st.claimed_early = static_cast<std::int32_t>(msgs.size());
  for (auto& m : msgs) {
    m.claim = claim;
    st.ready.push_back(std::move(m));
  }
  if (!st.stopping) // else they are handed back once the claim is written (on_claimed)
    dispatch(self);
}

void on_claimed(consumer_ptr self, std::int32_t asked, std::int32_t eta_below,
                std::int64_t generation, storage::claim_result& res) {
  auto& st = self->state;
  st.claiming = 0;
  st.claim_in_flight = false;
  send_held_outcomes(self);
  st.retry_backoff = milliseconds{0};
  auto woken = std::exchange(st.wake_during_claim, false);
  auto got = std::exchange(st.claimed_early, 0) + static_cast<std::int32_t>(res.messages.size());
  // A full batch means there is probably more; a wake during the claim means there may be.
  bool more = got == asked || woken;
  st.maybe_more = more; // whatever set it during the claim also set `woken`
  for (auto& m : res.messages)
    st.ready.push_back(std::move(m));
  if (st.stopping) {
    // The claim was in flight when the stop came: hand these back too.
    release_ready(self);
    return;
  }
  dispatch(self);
  if (got < eta_below)
    on_eta(self, generation, res.next_eta_ms); // the claim asked for it
  if (more)
    maybe_claim(self);
  else
    maybe_probe_eta(self);
}

void maybe_claim(consumer_ptr self) {
  auto& st = self->state;
  if (st.stopping || st.claim_in_flight || st.recovering)
    return;
  if (st.needs_recovery) {
    recover_after_failed_claim(self);
    return;
  }
  if (!st.maybe_more)
    return;
  auto free = st.free_slots();
  // Claim when at least half the capacity is free, or when the executors are about to run dry:
  // batches stay large under load and latency stays low when idle.
  if (free <= 0 || (free < std::max(1, st.capacity() / 2) && !st.ready.empty()))
    return;
  st.claiming = free;
  st.claim_in_flight = true;
  auto claim = ++st.claims;
  // The claim also asks when the next delayed message is due if it leaves an executor idle.
  // With every executor busy it does not, so that its reply (every message's start) does not
  // wait for that; if it comes back short, the eta probe asks instead (maybe_probe_eta).
  auto idle = std::max<std::int32_t>(1, st.settings.queue.concurrency - st.running -
                                          static_cast<std::int32_t>(st.ready.size()));
  auto generation = st.eta_generation;
  self
    ->request(st.settings.storage, seconds(30), claim_atom_v, st.settings.queue.name,
              st.settings.node_id, free, idle, claim)
    .then([=](storage::claim_result& res) { on_claimed(self, free, idle, generation, res); },
          [=](caf::error& err) {
            auto& s = self->state;
            s.claiming = 0;
            s.claim_in_flight = false;
            s.claimed_early = 0;
            s.wake_during_claim = false; // the recovery ends with a claim anyway
            // Its messages may have started. Those not started are dropped (the recovery below
            // hands them back if they are ours after all). When the database refused the claim,
            // it was rolled back, and the started ones' outcomes are dropped too; when the
            // connection was lost or the reply did not come, it may have committed, and they
            // go to the batcher (written if it did, refused if not).
            if (s.unwritten_claim != 0) {
              drop_unstarted_of_claim(self, s.unwritten_claim);
              bool unknown = err.category() != caf::atom("troupe") ||
                             static_cast<errc>(err.code()) == errc::connection_lost ||
                             static_cast<errc>(err.code()) == errc::bug;
              if (!unknown) {
                s.rolled_back.insert(s.unwritten_claim);
                s.unsettled -= static_cast<std::int32_t>(s.held_outcomes.size());
                s.held_outcomes.clear();
              }
            }
            send_held_outcomes(self);
            s.retry_backoff =
              std::min(milliseconds{5000},
                       s.retry_backoff.count() == 0 ? milliseconds{100} : s.retry_backoff * 2);
            log().warn("claim failed queue={} statement=claim_lock error={}; retrying in {}ms",
                       s.settings.queue.name, describe(err), s.retry_backoff.count());
            // The claim may have committed before its reply was lost: hand back whatever it
            // took before claiming again, or those rows would stay ours and never run.
            s.needs_recovery = true;
            recover_after_failed_claim(self);
            // After the recovery began, so that a stop waits for it.
            if (s.stopping)
              release_ready(self); // the stop left them for this claim's end
          });
}

void recover_after_failed_claim(consumer_ptr self) {
  auto& st = self->state;
  if (st.recovering || !st.needs_recovery)
    return;
  st.recovering = true;
  st.completed_during_recovery.clear();
  // First every outcome sent so far must be written (the batcher answers a flush only when it
  // holds nothing), so that a finished message is not mistaken for a lost claim.
  self->request(st.settings.batcher, caf::infinite, flush_atom_v)
    .then(
      [=](std::int64_t) {
        auto& s = self->state;
        std::vector<std::string> held = s.completed_during_recovery;
        for (const auto& sl : s.slots) {
          if (sl.running)
            held.push_back(sl.running->id);
          for (const auto& q : sl.queued)
            held.push_back(q.message.id);
        }
        for (const auto& m : s.ready)
          held.push_back(m.id);
        self
          ->request(s.settings.storage, seconds(30), release_atom_v, s.settings.node_id,
                    s.settings.queue.name, held)
          .then(
            [=](std::int64_t n) {
              auto& s2 = self->state;
              s2.recovering = false;
              s2.needs_recovery = false;
              if (n > 0)
                log().info("{} message(s) of a claim whose reply was lost were handed back "
                           "queue={} statement=recover_unheld",
                           n, s2.settings.queue.name);
              finish_stop_if_idle(self);
              if (!s2.stopping)
                schedule_wake(self, s2.retry_backoff);
            },
            [=](caf::error& err) {
              auto& s2 = self->state;
              s2.recovering = false;
              s2.retry_backoff =
                std::min(milliseconds{5000}, std::max(milliseconds{100}, s2.retry_backoff * 2));
              log().warn("handing back after a failed claim failed queue={} error={}; retrying "
                         "in {}ms",
                         s2.settings.queue.name, describe(err), s2.retry_backoff.count());
              if (s2.stopping) {
                finish_stop_if_idle(self); // the janitor recovers them once the node is gone
                return;
              }
              schedule_wake(self, s2.retry_backoff); // maybe_claim tries the clean-up again
            });
      },
      [=](caf::error& err) {
        auto& s = self->state;
        s.recovering = false;
        log().warn("flush before recovery failed: {}", describe(err));
        finish_stop_if_idle(self);
        if (!s.stopping)
          schedule_wake(self, s.retry_backoff);
      });
}

// Makes sure a limit timer fires for slot `index` no later than its attempt's deadline. A timer
// already due earlier is kept: when it fires, the handler arms the next one.
void arm_limit_timer(consumer_ptr self, std::size_t index) {
  auto& s = self->state.slots[index];
  if (s.timer_due && *s.timer_due <= s.deadline)
    return;
  s.timer_due = s.deadline;
  auto after = duration_cast<milliseconds>(s.deadline - steady_clock::now()) + milliseconds{1};
  self->delayed_send(self, std::max(after, milliseconds{0}), limit_atom_v,
                     static_cast<std::int32_t>(index), s.running->id, s.running->attempt);
}

// Gives `m` the slot's next ticket and puts it in the slot's outbox; returns the ticket. The
// dispatch sends each outbox in one message when it ends (flush_outboxes).
std::uint64_t put_in_outbox(slot& s, const storage::claimed_message& m) {
  ++s.last_ticket;
  if (s.outbox.empty())
    s.outbox_first = s.last_ticket;
  s.outbox.push_back(m);
  return s.last_ticket;
}

void flush_outboxes(consumer_ptr self) {
  for (auto& s : self->state.slots) {
    if (s.outbox.empty())
      continue;
    self->send(s.executor, run_atom_v, std::move(s.outbox), s.outbox_first);
    s.outbox.clear();
  }
}

// Slot `index` runs `m` from now on.
void start_running(consumer_ptr self, std::size_t index, storage::claimed_message m,
                   std::uint64_t ticket) {
  auto& st = self->state;
  auto& s = st.slots[index];
  s.running = std::move(m);
  s.running_ticket = ticket;
  ++st.running;
  // Past its time limit and the grace, the attempt is abandoned (see the limit handler).
  auto limit = time_limit_of(*st.settings.registry, *s.running) + st.settings.time_limit_grace;
  s.deadline = steady_clock::now() + limit;
  arm_limit_timer(self, index);
}

// What was sent to the slot's executor and not started comes back, in order, at the front of
// the ready list; the executor will drop it unseen. A started message stays with the slot.
void take_back(consumer_ptr self, slot& s) {
  auto& st = self->state;
  // Every ticket up to the gate's old value was started; none sent can match the new one.
  auto started = s.gate->exchange(++s.last_ticket);
  s.outbox.clear(); // not sent yet: what it holds is in the slot, and comes back below
  // Tickets grow from the running message to the back of the queue, so what was not started
  // is a tail.
  while (!s.queued.empty() && s.queued.back().ticket > started) {
    st.ready.push_front(std::move(s.queued.back().message));
    s.queued.pop_back();
  }
  if (s.running && s.running_ticket > started) {
    st.ready.push_front(std::move(*s.running));
    s.running.reset();
    --st.running;
  }
}

// The running message is settled: what was queued behind it runs now.
void promote(consumer_ptr self, std::size_t index) {
  auto& st = self->state;
  auto& s = st.slots[index];
  if (s.running || s.queued.empty())
    return;
  auto next = std::move(s.queued.front());
  s.queued.pop_front();
  start_running(self, index, std::move(next.message), next.ticket);
}

// Hands ready messages to idle executors.
void fill_idle(consumer_ptr self) {
  auto& st = self->state;
  for (std::size_t i = 0; i < st.slots.size() && !st.ready.empty(); ++i) {
    auto& s = st.slots[i];
    if (s.running)
      continue;
    auto m = std::move(st.ready.front());
    st.ready.pop_front();
    auto ticket = put_in_outbox(s, m);
    start_running(self, i, std::move(m), ticket);
  }
}

void assign(consumer_ptr self) {
  auto& st = self->state;
  // Idle executors first; then behind the busy ones, a level at a time (one message behind
  // each, then a second behind each, and so on) while any are left, so that a burst is spread
  // evenly and starts in about the order it was claimed.
  fill_idle(self);
  for (std::size_t depth = 1; depth <= pipeline_depth && !st.ready.empty() && !st.stopping;
       ++depth) {
    for (std::size_t i = 0; i < st.slots.size() && !st.ready.empty(); ++i) {
      auto& s = st.slots[i];
      if (!s.running || s.queued.size() >= depth)
        continue;
      auto m = std::move(st.ready.front());
      st.ready.pop_front();
      auto ticket = put_in_outbox(s, m);
      s.queued.push_back({std::move(m), ticket});
    }
  }
  // An executor left idle with nothing ready takes over what is queued behind another's
  // running task (which may be a long one). What it does not take waits in the ready list for
  // the next dispatch.
  for (auto& busy : st.slots) {
    if (!st.ready.empty() || st.stopping ||
        st.running == static_cast<std::int32_t>(st.slots.size()))
      return;
    if (busy.queued.empty() || busy.queued.back().ticket <= busy.gate->load())
      continue; // nothing queued, or all of it already started
    take_back(self, busy);
    fill_idle(self);
  }
}

// Hands ready messages to executors: one message to each executor that gets any.
void dispatch(consumer_ptr self) {
  assign(self);
  flush_outboxes(self);
}

executor_actor new_executor(consumer_ptr self, std::size_t index) {
  auto& st = self->state;
  auto& s = st.slots[index];
  s.gate = std::make_shared<std::atomic<std::uint64_t>>(0);
  s.last_ticket = 0;
  return spawn_executor(self, st.settings.registry, st.settings.queue.name,
                        caf::actor_cast<consumer_actor>(self), static_cast<std::int32_t>(index),
                        st.stopping_flag, s.gate);
}

// Forgets the rolled-back claims none of whose messages run any more.
void forget_rolled_back(consumer_ptr self) {
  auto& st = self->state;
  std::erase_if(st.rolled_back, [&](std::uint64_t claim) {
    for (const auto& s : st.slots) {
      if (s.running && s.running->claim == claim)
        return false;
      for (const auto& q : s.queued)
        if (q.message.claim == claim)
          return false;
    }
    return true;
  });
}

void send_outcome(consumer_ptr self, storage::outcome out) {
  auto& st = self->state;
  ++st.outcomes_sent;
  if (out.state == storage::outcome_state::retry)
    st.retries_unsettled.push_back(st.outcomes_sent);
  self->send(st.settings.batcher, complete_atom_v, std::move(out));
}

// Settles a slot's attempt with `out` (from its executor, a crash or an abandonment).
void settle(consumer_ptr self, slot& s, storage::outcome out) {
  auto& st = self->state;
  auto claim = s.running->claim;
  bool unwritten = st.unwritten_claim != 0 && claim == st.unwritten_claim;
  s.running.reset();
  --st.running;
  ++st.executed;
  if (!st.rolled_back.empty() && st.rolled_back.contains(claim)) {
    log().info("dropping the outcome of message {}: its claim was rolled back queue={}", out.id,
               st.settings.queue.name);
    forget_rolled_back(self);
    return;
  }
  if (st.recovering)
    st.completed_during_recovery.push_back(out.id);
  ++st.unsettled; // held or not, it is not written yet
  if (unwritten)
    st.held_outcomes.push_back(std::move(out));
  else
    send_outcome(self, std::move(out));
}

// The claim whose messages came locked has its reply: the outcomes held for it go to the
// batcher. After a failed claim too: if it did commit, they are written; if not, they are
// refused (the rows are still queued, or another claim has them).
void send_held_outcomes(consumer_ptr self) {
  auto& st = self->state;
  st.unwritten_claim = 0;
  for (auto& out : st.held_outcomes)
    send_outcome(self, std::move(out));
  st.held_outcomes.clear();
}

// Claim `claim` failed after its messages came: those not started are dropped. If it did
// commit after all, the recovery that follows a failed claim hands them back.
void drop_unstarted_of_claim(consumer_ptr self, std::uint64_t claim) {
  auto& st = self->state;
  for (auto& s : st.slots)
    take_back(self, s);
  std::erase_if(st.ready, [&](const storage::claimed_message& m) { return m.claim == claim; });
  if (!st.stopping)
    dispatch(self);
}

void release_ready(consumer_ptr self) {
  auto& st = self->state;
  // A claim in flight may hold rows locked but not yet marked running: handed back now, they
  // would be found still queued, and would then stay this node's. Everything goes back when it
  // ends (on_claimed, or its error handler).
  if (st.claim_in_flight)
    return;
  if (st.ready.empty()) {
    finish_stop_if_idle(self);
    return;
  }
  std::vector<storage::claimed_message> msgs(st.ready.begin(), st.ready.end());
  st.ready.clear();
  ++st.releasing;
  auto count = static_cast<std::int64_t>(msgs.size());
  self->request(st.settings.storage, seconds(30), release_atom_v, st.settings.node_id, msgs)
    .then(
      [=](std::int64_t n) {
        self->state.released += n;
        --self->state.releasing;
        finish_stop_if_idle(self);
      },
      [=](caf::error& err) {
        // Not written: the janitor recovers them once this node is gone.
        log().warn("could not hand back {} prefetched messages queue={}: {}", count,
                   self->state.settings.queue.name, describe(err));
        --self->state.releasing;
        finish_stop_if_idle(self);
      });
}

void replace_executor(consumer_ptr self, std::size_t index, const caf::error& reason) {
  auto& st = self->state;
  auto& s = st.slots[index];
  take_back(self, s); // what it never started runs elsewhere
  // What it started is a lost attempt: the running message, and those queued behind it that
  // the gate says the executor had started too.
  for (;;) {
    if (!s.running)
      promote(self, index);
    if (!s.running)
      break;
    log().error("executor crashed queue={} message={} task={} reason={}", st.settings.queue.name,
                s.running->id, s.running->task, caf::to_string(reason));
    // Failed like any attempt, so the retry policy applies: the message is not lost.
    auto o = lost_attempt(*st.settings.registry, *s.running, st.settings.queue.name,
                          "troupe::executor_crashed",
                          "the executor running this task died: " + caf::to_string(reason));
    settle(self, s, std::move(o));
  }
  if (st.stopping) {
    release_ready(self); // what came back is handed back too
    return;              // no replacement while stopping
  }
  s.executor = new_executor(self, index);
  dispatch(self);
  maybe_claim(self);
}

// The attempt in slot `index` ran past its time limit and grace without its executor
// answering: the executor cannot be interrupted, so the slot gets a new one and the attempt is
// recorded as failed under the retry policy.
void abandon_attempt(consumer_ptr self, std::size_t index) {
  auto& st = self->state;
  auto& s = st.slots[index];
  take_back(self, s); // the message queued behind it runs on another executor
  if (!s.running) {
    if (st.stopping)
      release_ready(self);
    else
      dispatch(self);
    return;
  }
  auto limit = time_limit_of(*st.settings.registry, *s.running);
  auto reason = fmt::format("the task ran past its time limit of {}ms and the {}ms grace "
                            "without returning; its executor was abandoned",
                            limit.count(), st.settings.time_limit_grace.count());
  log().warn("abandoning an attempt queue={} message={} task={} attempt={}: {}",
             st.settings.queue.name, s.running->id, s.running->task, s.running->attempt, reason);
  auto out = lost_attempt(*st.settings.registry, *s.running, st.settings.queue.name,
                          "troupe::time_limit_abandoned", reason);
  st.abandoned.insert(s.executor.address());
  // It ends as soon as its task returns (an exit is handled after the handler at hand).
  self->send_exit(s.executor, caf::exit_reason::user_shutdown);
  settle(self, s, std::move(out));
  // The gate said the executor had also started messages queued behind (the task did return,
  // but its report came after the timer): their reports will be dropped with the executor's,
  // so those attempts are lost too.
  for (promote(self, index); s.running; promote(self, index)) {
    auto behind = lost_attempt(*st.settings.registry, *s.running, st.settings.queue.name,
                               "troupe::time_limit_abandoned",
                               "started on an executor abandoned for the attempt before it");
    settle(self, s, std::move(behind));
  }
  if (st.stopping) {
    release_ready(self);
    return;
  }
  s.executor = new_executor(self, index);
  dispatch(self);
  maybe_claim(self);
}

consumer_actor::behavior_type consumer_impl(consumer_ptr self, consumer_settings settings) {
  auto& st = self->state;
  st.settings = std::move(settings);
  st.needs_recovery = st.settings.recover_on_start;
  st.slots.resize(static_cast<std::size_t>(st.settings.queue.concurrency));
  for (std::size_t i = 0; i < st.slots.size(); ++i)
    st.slots[i].executor = new_executor(self, i);
  self->set_exit_handler([=](caf::exit_msg& em) {
    auto& s = self->state;
    if (s.abandoned.erase(em.source) > 0)
      return; // an abandoned executor's task finally returned, or it died
    for (std::size_t i = 0; i < s.slots.size(); ++i) {
      if (s.slots[i].executor.address() == em.source) {
        replace_executor(self, i, em.reason);
        return;
      }
    }
    // From our supervisor (or anyone else): stop, and the executors with us.
    self->quit(em.reason ? em.reason : caf::error{caf::exit_reason::user_shutdown});
  });
  self->set_default_handler(
    [](caf::scheduled_actor*, caf::message_view& x) -> caf::result<caf::message> {
      log().warn("consumer: unexpected message {}", caf::to_string(x.content()));
      return caf::sec::unexpected_message;
    });
  // The first look at the queue, then the jittered poll that backs up notifications.
  self->send(self, wake_atom_v);
  self->delayed_send(self, st.jittered(st.settings.queue.poll_interval), poll_atom_v);
  return {
    [=](wake_atom) {
      eta_may_change(self);
      maybe_claim(self);
    },
    [=](claim_atom, std::uint64_t claim, std::vector<storage::claimed_message>& msgs) {
      on_locked(self, claim, msgs);
    },
    [=](flush_atom, std::int64_t settled) {
      auto& st = self->state;
      st.unsettled = std::max<std::int32_t>(0, st.unsettled - static_cast<std::int32_t>(settled));
      // The batcher settles outcomes in the order it got them.
      st.outcomes_settled += settled;
      while (!st.retries_unsettled.empty() && st.retries_unsettled.front() <= st.outcomes_settled) {
        st.retries_unsettled.pop_front();
        eta_may_change(self); // a claim, then next_eta sets the timer for the retry's eta
      }
      maybe_claim(self);
    },
    [=](executed_atom, std::int32_t index, storage::outcome& out) {
      auto& s = self->state;
      auto& sl = s.slots.at(static_cast<std::size_t>(index));
      // Only the slot's current executor settles it: an abandoned executor's late report, or
      // one for a slot a crash already settled, is dropped (its completion would be refused).
      if (!sl.running || sl.running->id != out.id ||
          caf::actor_cast<caf::actor_addr>(self->current_sender()) != sl.executor.address())
        return;
      settle(self, sl, std::move(out));
      promote(self, static_cast<std::size_t>(index));
      if (s.stopping) {
        finish_stop_if_idle(self);
        return;
      }
      dispatch(self);
      maybe_claim(self);
    },
    [=](stop_atom) -> caf::typed_response_promise<consumer_report> {
      auto& s = self->state;
      auto rp = self->make_response_promise<consumer_report>();
      if (s.stopping) {
        rp.deliver(s.report());
        return rp;
      }
      s.stopping = true;
      *s.stopping_flag = true; // tasks that asked are told through their context
      s.stop_promise = rp;
      for (auto& sl : s.slots)
        take_back(self, sl); // sent but not started: handed back with the rest
      release_ready(self);   // with a claim in flight, once it ends
      return rp;
    },
    [=](status_atom) { return self->state.report(); },
    [=](poll_atom) {
      auto& s = self->state;
      if (s.stopping)
        return;
      eta_may_change(self); // rows inserted without a notification, or one that was lost
      maybe_claim(self);
      self->delayed_send(self, s.jittered(s.settings.queue.poll_interval), poll_atom_v);
    },
    [=](limit_atom, std::int32_t index, const std::string&, std::int32_t) {
      // The slot's timer fired; the attempt running now may be a later one than the timer was
      // armed for, so its own deadline decides.
      auto& s = self->state;
      auto i = static_cast<std::size_t>(index);
      auto& sl = s.slots.at(i);
      auto now = steady_clock::now();
      if (sl.timer_due && *sl.timer_due <= now)
        sl.timer_due.reset();
      if (!sl.running)
        return;
      if (sl.deadline <= now)
        abandon_attempt(self, i);
      else
        arm_limit_timer(self, i);
    },
    [=](eta_atom) {
      auto& s = self->state;
      if (s.eta_wake && *s.eta_wake <= steady_clock::now())
        s.eta_wake.reset();
      // What came due is claimed now (a claim in flight may have looked just before the eta),
      // and the next eta is unknown.
      eta_may_change(self);
      maybe_claim(self);
    },
  };
}

} // namespace

consumer_actor spawn_consumer(caf::actor_system& sys, consumer_settings settings) {
  return sys.spawn(consumer_impl, std::move(settings));
}

} // namespace troupe::actors
