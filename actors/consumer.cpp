#include "actors/consumer_state.hpp"

#include "actors/execute.hpp"
#include "troupe/log.hpp"

namespace troupe::actors {

namespace detail {

using namespace std::chrono;

namespace {

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
  s.started = steady_clock::now();
  s.start_written = false;
  s.deadline = s.started + limit;
  if (const auto& metrics = st.settings.metrics) {
    // From when the message became ready (published, or its eta) to now, on the wall clock.
    auto now_ms = duration_cast<milliseconds>(system_clock::now().time_since_epoch()).count();
    metrics->attempt_started(st.settings.metrics_queue, s.running->task,
                             now_ms - std::max(s.running->enqueued_at_ms, s.running->eta_ms));
  }
  arm_limit_timer(self, i);
  arm_starts_timer(self);
}

} // namespace

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

// Hands ready messages to executors: one run() to each executor that gets any.
void dispatch(consumer_ptr self) {
  auto& st = self->state;
  if (!may_start(st))
    return; // nothing starts until the node has its liveness lock back, or while paused
  for (auto i : st.slots->assign(st.ready, !st.stopping))
    started(self, i);
  st.slots->flush();
  st.note_load();
}

void send_outcome(consumer_ptr self, storage::outcome out) {
  auto& st = self->state;
  st.claims.outcome_sent(out.state == storage::outcome_state::retry);
  self->send(st.settings.batcher, complete_atom_v, std::move(out));
}

namespace {

// Settles slot `i`'s running attempt with `out` (from its executor, or an abandonment).
void settle(consumer_ptr self, std::size_t i, storage::outcome out) {
  auto& st = self->state;
  auto finished = st.slots->finish_running(i);
  auto claim = finished.claim;
  ++st.executed;
  if (st.settings.metrics) {
    st.settings.metrics->attempt_finished(st.settings.metrics_queue, finished.task, out.state,
                                          out.ran_ms);
    st.note_load();
  }
  st.cancels->forget(out.id);
  if (st.claims.rolled_back(claim)) {
    log().info("dropping the outcome of message {}: its claim was rolled back queue={}", out.id,
               st.settings.queue.name);
    st.claims.forget_rolled_back([&](std::uint64_t c) { return st.slots->holds_claim(c); });
    return;
  }
  if (st.claims.take_void(claim, out.id)) {
    log().info("dropping the outcome of message {}: its claim never committed queue={}", out.id,
               st.settings.queue.name);
    return;
  }
  st.claims.settled_during_recovery(out.id);
  st.claims.outcome_pending();
  if (st.claims.must_hold(claim))
    st.claims.hold(std::move(out));
  else
    send_outcome(self, std::move(out));
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
    out.ran_ms = duration_cast<milliseconds>(steady_clock::now() - s.started).count();
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
  if (st.stopping || st.paused) {
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
  st.lock_held = st.settings.lock_held;
  // Told from the tasks' threads; a weak handle, so that the board does not keep the actor.
  auto weak = caf::weak_actor_ptr{self->ctrl()};
  st.cancels = std::make_shared<attempt_board>(
    [weak] {
      if (auto strong = weak.lock())
        caf::anon_send(caf::actor_cast<consumer_actor>(strong), progress_atom_v);
    },
    [weak] {
      if (auto strong = weak.lock())
        caf::anon_send(caf::actor_cast<consumer_actor>(strong), confirm_start_atom_v);
    });
  auto factory = st.settings.executors
                   ? st.settings.executors(st.stopping_flag)
                   : thread_executors({st.settings.registry, st.settings.queue.name,
                                       st.stopping_flag, st.cancels, st.settings.coordination});
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
    [=](liveness_atom, bool held, bool reaped) {
      auto& s = self->state;
      s.lock_held = held;
      if (!held) {
        // Sent to executors but not started: back to ready, where nothing starts them.
        s.slots->take_back_all(s.ready);
        return;
      }
      if (reaped) {
        // Every attempt running now was of a delivery the janitor took back: their rows went
        // back to their queues, so their outcomes are void (a later claim of this node may
        // deliver the same message with the same attempt number).
        for (std::size_t k = 0; k < s.slots->size(); ++k)
          if (const auto& r = (*s.slots)[k].running)
            s.claims.make_void(r->claim, r->id);
      }
      if (reaped && !s.ready.empty()) {
        // The node was declared dead: its prefetched messages went back to their queues (and
        // may run elsewhere by now); they are no longer this node's. Those of a claim still
        // in flight are kept: that claim's end decides about them.
        std::vector<storage::claimed_message> in_flight;
        if (s.claims.in_flight())
          in_flight = s.ready.take_claim(s.claims.current());
        auto dropped = s.ready.take_all();
        for (auto& m : in_flight)
          s.ready.push(std::move(m));
        if (!dropped.empty())
          log().warn("dropping {} prefetched message(s): the node was declared dead while it "
                     "had no lock and they went back to their queue queue={}",
                     dropped.size(), s.settings.queue.name);
      }
      if (s.stopping) {
        release_ready(self);
        return;
      }
      s.claims.something_changed();
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
      if (auto claim = s.claims.uncertain()) {
        // No recovery runs during the stop, and this node claims nothing more: the outcomes of
        // the claim whose commit is unknown go to the batcher, written only where it did
        // commit (no later delivery of this node can share their token now).
        std::vector<std::string> all;
        for (const auto& [id, attempt] : s.claims.held_attempts())
          all.push_back(id);
        for (const auto& m : s.slots->of_claim(*claim))
          all.push_back(m.id);
        for (auto& out : s.claims.resolve_uncertain(all, {}))
          send_outcome(self, std::move(out));
        s.uncertain_unstarted.clear();
      }
      s.stop_promise = rp;
      s.slots->take_back_all(s.ready); // sent but not started: handed back with the rest
      release_ready(self);             // with a claim in flight, once it ends
      return rp;
    },
    [=](pause_atom, bool paused) { on_pause(self, paused); },
    [=](cancels_atom, const std::vector<std::string>& ids) { on_cancels(self, ids); },
    [=](progress_atom) { on_progress(self); },
    [=](confirm_start_atom) { confirm_starts(self); },
    [=](starts_atom) {
      self->state.starts_timer = false;
      write_starts(self);
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

} // namespace detail

consumer_actor spawn_consumer(caf::actor_system& sys, consumer_settings settings) {
  return sys.spawn(detail::consumer_impl, std::move(settings));
}

} // namespace troupe::actors
