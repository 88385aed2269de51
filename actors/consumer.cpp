#include "actors/consumer.hpp"

#include "actors/claim_tracker.hpp"
#include "actors/execute.hpp"
#include "actors/executor_slots.hpp"
#include "troupe/log.hpp"

#include <optional>
#include <random>

namespace troupe::actors {

namespace {

using namespace std::chrono;

struct consumer_state {
  static inline const char* name = "troupe.consumer";
  consumer_settings settings;
  std::optional<executor_slots> slots; // built once the actor exists: executors report to it
  ready_queue ready;                   // claimed, not handed to an executor
  claim_tracker claims;
  bool stopping = false;
  std::optional<caf::typed_response_promise<consumer_report>> stop_promise;
  std::int32_t releasing = 0;                       // hand-back requests in flight
  std::optional<steady_clock::time_point> eta_wake; // earliest scheduled eta wake
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
  milliseconds jittered(milliseconds base) {
    auto spread = base.count() / 10;
    if (spread <= 0)
      return base;
    std::uniform_int_distribution<long> d(-spread, spread);
    return base + milliseconds{d(rng)};
  }
  consumer_report report() {
    std::erase_if(abandoned, [](const std::unique_ptr<executor>& e) { return !e->busy(); });
    return consumer_report{settings.queue.name, executed, released, slots->running(),
                           static_cast<std::int64_t>(abandoned.size())};
  }
};

using consumer_ptr = consumer_actor::stateful_pointer<consumer_state>;

void maybe_claim(consumer_ptr self);
void release_ready(consumer_ptr self);

bool idle_now(const consumer_state& st) {
  return st.slots->running() == 0 && st.slots->queued() == 0 && !st.claims.in_flight() &&
         st.releasing == 0 && st.claims.state() != claim_tracker::phase::recovering &&
         st.ready.empty();
}

void finish_stop_if_idle(consumer_ptr self) {
  auto& st = self->state;
  if (!st.stopping || !st.stop_promise || !idle_now(st))
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

void on_eta(consumer_ptr self, std::int64_t generation, std::int64_t next_eta_ms) {
  self->state.claims.eta_known(generation);
  if (next_eta_ms >= 0)
    schedule_wake(self, milliseconds{next_eta_ms + 1});
}

// Makes sure a limit timer fires for slot `i` no later than its attempt's deadline. A timer
// already due earlier is kept: when it fires, the handler arms the next one.
void arm_limit_timer(consumer_ptr self, std::size_t i) {
  auto& s = (*self->state.slots)[i];
  if (s.timer_due && *s.timer_due <= s.deadline)
    return;
  s.timer_due = s.deadline;
  auto after = duration_cast<milliseconds>(s.deadline - steady_clock::now()) + milliseconds{1};
  self->delayed_send(self, std::max(after, milliseconds{0}), limit_atom_v,
                     static_cast<std::int32_t>(i));
}

// Slot `i` runs a message from now on: past its time limit and the grace, it is abandoned.
void started(consumer_ptr self, std::size_t i) {
  auto& st = self->state;
  auto& s = (*st.slots)[i];
  auto limit = time_limit_of(*st.settings.registry, *s.running) + st.settings.time_limit_grace;
  s.deadline = steady_clock::now() + limit;
  arm_limit_timer(self, i);
}

// Hands ready messages to executors: one run() to each executor that gets any.
void dispatch(consumer_ptr self) {
  auto& st = self->state;
  for (auto i : st.slots->assign(st.ready, !st.stopping))
    started(self, i);
  st.slots->flush();
}

void send_outcome(consumer_ptr self, storage::outcome out) {
  auto& st = self->state;
  st.claims.outcome_sent(out.state == storage::outcome_state::retry);
  self->send(st.settings.batcher, complete_atom_v, std::move(out));
}

// Settles slot `i`'s running attempt with `out` (from its executor, or an abandonment).
void settle(consumer_ptr self, std::size_t i, storage::outcome out) {
  auto& st = self->state;
  auto claim = st.slots->finish_running(i).claim;
  ++st.executed;
  if (st.claims.rolled_back(claim)) {
    log().info("dropping the outcome of message {}: its claim was rolled back queue={}", out.id,
               st.settings.queue.name);
    st.claims.forget_rolled_back([&](std::uint64_t c) { return st.slots->holds_claim(c); });
    return;
  }
  st.claims.settled_during_recovery(out.id);
  st.claims.outcome_pending();
  if (st.claims.must_hold(claim))
    st.claims.hold(std::move(out));
  else
    send_outcome(self, std::move(out));
}

void send_held_outcomes(consumer_ptr self) {
  for (auto& out : self->state.claims.take_held())
    send_outcome(self, std::move(out));
}

// Asks when the next delayed message is due, apart from any claim, if the last answer may be
// stale and no claim follows anyway.
void maybe_probe_eta(consumer_ptr self) {
  auto& st = self->state;
  if (st.stopping || !st.claims.should_probe())
    return;
  auto generation = st.claims.begin_probe();
  self->request(st.settings.storage, seconds(30), next_eta_atom_v, st.settings.queue.name)
    .then(
      [=](std::int64_t next_eta_ms) {
        self->state.claims.end_probe();
        on_eta(self, generation, next_eta_ms);
        maybe_probe_eta(self); // a wake during the probe may have made it stale again
      },
      [=](caf::error& err) {
        auto& s = self->state;
        s.claims.end_probe();
        log().warn("next_eta failed queue={} error={}; the poll looks again", s.settings.queue.name,
                   describe(err));
      });
}

// The messages of claim `claim` came locked, before its reply: they start now.
void on_locked(consumer_ptr self, std::uint64_t claim,
               std::vector<storage::claimed_message>& msgs) {
  auto& st = self->state;
  if (!st.claims.locked(claim, msgs.size())) {
    log().warn("ignoring {} messages of a claim given up queue={}", msgs.size(),
               st.settings.queue.name);
    return; // the recovery after it hands back whatever it took
  }
  for (auto& m : msgs) {
    m.claim = claim;
    st.ready.push(std::move(m));
  }
  if (!st.stopping) // else they are handed back once the claim is written
    dispatch(self);
}

void on_claimed(consumer_ptr self, std::int32_t eta_below, std::int64_t generation,
                storage::claim_result& res) {
  auto& st = self->state;
  auto end = st.claims.succeeded(res.messages.size());
  send_held_outcomes(self);
  for (auto& m : res.messages)
    st.ready.push(std::move(m));
  if (st.stopping) {
    release_ready(self); // the claim was in flight when the stop came: these go back too
    return;
  }
  dispatch(self);
  if (end.got < static_cast<std::size_t>(eta_below))
    on_eta(self, generation, res.next_eta_ms); // the claim asked for it
  if (end.more)
    maybe_claim(self);
  else
    maybe_probe_eta(self);
}

void recover_after_failed_claim(consumer_ptr self);

void on_claim_failed(consumer_ptr self, const caf::error& err) {
  auto& st = self->state;
  // Its messages may have started. Those not started are dropped (the recovery hands them back
  // if they are ours after all). When the database refused the claim, it was rolled back and
  // the started ones' outcomes are dropped too; when the connection was lost or the reply did
  // not come, it may have committed, and they go to the batcher (written if it did).
  if (st.claims.state() == claim_tracker::phase::locked) {
    st.slots->take_back_all(st.ready);
    st.ready.drop_claim(st.claims.current());
  }
  bool unknown = err.category() != caf::atom("troupe") ||
                 static_cast<errc>(err.code()) == errc::connection_lost ||
                 static_cast<errc>(err.code()) == errc::bug;
  st.claims.failed(unknown ? claim_tracker::failure::unknown : claim_tracker::failure::rolled_back);
  send_held_outcomes(self);
  if (!st.stopping)
    dispatch(self);
  log().warn("claim failed queue={} statement=claim_lock error={}; retrying in {}ms",
             st.settings.queue.name, describe(err), st.claims.backoff().count());
  recover_after_failed_claim(self);
  if (st.stopping)
    release_ready(self); // the stop left them for this claim's end
}

void maybe_claim(consumer_ptr self) {
  auto& st = self->state;
  if (st.stopping)
    return;
  if (st.claims.state() == claim_tracker::phase::must_recover) {
    recover_after_failed_claim(self);
    return;
  }
  auto rows = st.claims.rows_to_claim(st.free_slots(), st.capacity(), !st.ready.empty());
  if (rows <= 0)
    return;
  // The claim also asks when the next delayed message is due if it leaves an executor idle.
  // With every executor busy it does not, so that its reply (every message's start) does not
  // wait for that; if it comes back short, the eta probe asks instead (maybe_probe_eta).
  auto idle = std::max<std::int32_t>(1, st.settings.queue.concurrency - st.slots->running() -
                                          static_cast<std::int32_t>(st.ready.size()));
  auto generation = st.claims.generation();
  auto claim = st.claims.begin(rows);
  self
    ->request(st.settings.storage, seconds(30), claim_atom_v, st.settings.queue.name,
              st.settings.node_id, rows, idle, claim)
    .then([=](storage::claim_result& res) { on_claimed(self, idle, generation, res); },
          [=](caf::error& err) { on_claim_failed(self, err); });
}

// After a failed claim (or in a replacement consumer): every outcome sent so far is written
// first (the batcher answers a flush once it holds nothing sent before), so that a finished
// message is not mistaken for a lost claim; then every row the node owns in the queue and the
// consumer does not hold goes back.
void recover_after_failed_claim(consumer_ptr self) {
  auto& st = self->state;
  if (st.claims.state() != claim_tracker::phase::must_recover)
    return;
  st.claims.begin_recovery();
  auto retry_later = [=](const std::string& what, const caf::error& err) {
    auto& s = self->state;
    s.claims.recovery_failed();
    log().warn("{} failed queue={} error={}; retrying in {}ms", what, s.settings.queue.name,
               describe(err), s.claims.backoff().count());
    finish_stop_if_idle(self); // when stopping, the janitor recovers them once the node is gone
    if (!s.stopping)
      schedule_wake(self, s.claims.backoff()); // maybe_claim tries the recovery again
  };
  self->request(st.settings.batcher, caf::infinite, flush_atom_v)
    .then(
      [=](std::int64_t) {
        auto& s = self->state;
        auto held = s.claims.completed_during_recovery();
        s.slots->ids(held);
        s.ready.ids(held);
        self
          ->request(s.settings.storage, seconds(30), recover_atom_v, s.settings.node_id,
                    s.settings.queue.name, held)
          .then(
            [=](std::int64_t n) {
              auto& s2 = self->state;
              s2.claims.recovery_done();
              if (n > 0)
                log().info("{} message(s) of a claim whose reply was lost were handed back "
                           "queue={} statement=recover_unheld",
                           n, s2.settings.queue.name);
              finish_stop_if_idle(self);
              if (!s2.stopping)
                schedule_wake(self, s2.claims.backoff());
            },
            [=](caf::error& err) { retry_later("handing back after a failed claim", err); });
      },
      [=](caf::error& err) { retry_later("the flush before a recovery", err); });
}

void release_ready(consumer_ptr self) {
  auto& st = self->state;
  // A claim in flight may hold rows locked but not yet marked running: handed back now, they
  // would be found still queued, and would then stay this node's. Everything goes back when it
  // ends (on_claimed, or on_claim_failed).
  if (st.claims.in_flight())
    return;
  if (st.ready.empty()) {
    finish_stop_if_idle(self);
    return;
  }
  auto msgs = st.ready.take_all();
  ++st.releasing;
  auto count = msgs.size();
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

// The attempt in slot `i` ran past its time limit and grace without its executor answering:
// the thread cannot be interrupted, so the slot gets a new executor and the attempt is
// recorded as failed under the retry policy.
void abandon_attempt(consumer_ptr self, std::size_t i) {
  auto& st = self->state;
  auto& s = (*st.slots)[i];
  st.slots->take_back(i, st.ready); // what is queued behind it runs on another executor
  if (s.running) {
    auto limit = time_limit_of(*st.settings.registry, *s.running);
    auto reason = fmt::format("the task ran past its time limit of {}ms and the {}ms grace "
                              "without returning; its executor was abandoned",
                              limit.count(), st.settings.time_limit_grace.count());
    log().warn("abandoning an attempt queue={} message={} task={} attempt={}: {}",
               st.settings.queue.name, s.running->id, s.running->task, s.running->attempt, reason);
    auto out = lost_attempt(*st.settings.registry, *s.running, st.settings.queue.name,
                            "troupe::time_limit_abandoned", reason);
    settle(self, i, std::move(out));
    // The gate said the executor had also started messages queued behind (the task did
    // return, but its report came after the timer): their reports are dropped with the
    // executor, so those attempts are lost too.
    while (st.slots->promote(i)) {
      auto behind = lost_attempt(*st.settings.registry, *s.running, st.settings.queue.name,
                                 "troupe::time_limit_abandoned",
                                 "started on an executor abandoned for the attempt before it");
      settle(self, i, std::move(behind));
    }
    st.abandoned.push_back(st.slots->replace(i));
  }
  if (st.stopping) {
    release_ready(self);
    return;
  }
  dispatch(self);
  maybe_claim(self);
}

consumer_actor::behavior_type consumer_impl(consumer_ptr self, consumer_settings settings) {
  auto& st = self->state;
  st.settings = std::move(settings);
  st.claims = claim_tracker(st.settings.recover_on_start);
  auto factory =
    st.settings.executors
      ? st.settings.executors(st.stopping_flag)
      : thread_executors({st.settings.registry, st.settings.queue.name, st.stopping_flag});
  auto me = caf::actor_cast<consumer_actor>(self);
  st.slots.emplace(static_cast<std::size_t>(st.settings.queue.concurrency),
                   [factory, me](std::shared_ptr<std::atomic<std::uint64_t>> gate,
                                 std::size_t index, std::uint64_t serial) {
                     auto slot = static_cast<std::int32_t>(index);
                     return factory(std::move(gate), [me, slot, serial](storage::outcome out) {
                       caf::anon_send(me, executed_atom_v, slot, serial, std::move(out));
                     });
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
      self->state.claims.something_changed();
      maybe_claim(self);
    },
    [=](locked_atom, std::uint64_t claim, std::vector<storage::claimed_message>& msgs) {
      on_locked(self, claim, msgs);
    },
    [=](settled_atom, std::int64_t count) {
      auto& s = self->state;
      if (s.claims.outcomes_settled(count))
        s.claims.something_changed(); // a retry is queued again: a claim, then its eta
      maybe_claim(self);
    },
    [=](executed_atom, std::int32_t slot, std::uint64_t serial, storage::outcome& out) {
      auto& s = self->state;
      auto i = static_cast<std::size_t>(slot);
      auto& sl = (*s.slots)[i];
      // Only the slot's current executor settles it: a late report of an abandoned one is
      // dropped (its completion would be refused anyway).
      if (serial != sl.serial || !sl.running || sl.running->id != out.id)
        return;
      settle(self, i, std::move(out));
      s.slots->promote(i);
      if (sl.running)
        started(self, i);
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
      s.slots->take_back_all(s.ready); // sent but not started: handed back with the rest
      release_ready(self);             // with a claim in flight, once it ends
      return rp;
    },
    [=](status_atom) { return self->state.report(); },
    [=](poll_atom) {
      auto& s = self->state;
      if (s.stopping)
        return;
      s.claims.something_changed(); // rows inserted without a notification, or one lost
      maybe_claim(self);
      self->delayed_send(self, s.jittered(s.settings.queue.poll_interval), poll_atom_v);
    },
    [=](limit_atom, std::int32_t slot) {
      // The slot's timer fired; the attempt running now may be a later one than the timer was
      // armed for, so its own deadline decides.
      auto& s = self->state;
      auto i = static_cast<std::size_t>(slot);
      auto& sl = (*s.slots)[i];
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
      s.claims.something_changed();
      maybe_claim(self);
    },
  };
}

} // namespace

consumer_actor spawn_consumer(caf::actor_system& sys, consumer_settings settings) {
  return sys.spawn(consumer_impl, std::move(settings));
}

} // namespace troupe::actors
