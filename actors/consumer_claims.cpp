// The claim side of the consumer: claims and their two steps, the eta probe, the recovery
// after a failed claim, and the hand-back of prefetched messages.
#include "actors/consumer_state.hpp"

#include "troupe/log.hpp"

#include <algorithm>
#include <set>

namespace troupe::actors::detail {

using namespace std::chrono;

namespace {

void recover_after_failed_claim(consumer_ptr self);

void on_eta(consumer_ptr self, std::int64_t generation, std::int64_t next_eta_ms) {
  self->state.claims.eta_known(generation);
  if (next_eta_ms >= 0)
    schedule_wake(self, milliseconds{next_eta_ms + 1});
}

// Asks when the next delayed message is due, apart from any claim, if the last answer may be
// stale and no claim follows anyway.
void maybe_probe_eta(consumer_ptr self) {
  auto& st = self->state;
  if (st.stopping || !st.lock_held || !st.claims.should_probe())
    return;
  if (auto wait = st.claims.probe_held_off_for(steady_clock::now()); wait.count() > 0) {
    schedule_wake(self, wait); // the wake probes again, since the answer is still stale
    return;
  }
  auto generation = st.claims.begin_probe();
  self->request(st.settings.storage, seconds(30), next_eta_atom_v, st.settings.queue.name)
    .then(
      [=](std::int64_t next_eta_ms) {
        self->state.claims.end_probe();
        self->state.claims.probe_succeeded();
        on_eta(self, generation, next_eta_ms);
        if (next_eta_ms < 0 && !self->state.stopping) {
          // Nothing is due later. A delayed message that came due after the last claim looked
          // and before this probe is not "later" either: it is ready, and without a claim now
          // it would wait for the poll.
          self->state.claims.may_have_come_due();
          maybe_claim(self);
        }
        maybe_probe_eta(self); // a wake during the probe may have made it stale again
      },
      [=](caf::error& err) {
        auto& s = self->state;
        s.claims.end_probe();
        s.claims.probe_failed(steady_clock::now());
        log().warn("next_eta failed queue={} error={}; retrying in {}ms", s.settings.queue.name,
                   describe(err), s.claims.probe_backoff().count());
        if (!s.stopping)
          schedule_wake(self, s.claims.probe_backoff()); // the wake claims, then probes again
      });
}

void on_claimed(consumer_ptr self, std::int32_t eta_below, std::int64_t generation,
                storage::claim_result& res) {
  auto& st = self->state;
  auto end = st.claims.succeeded(res.messages.size());
  send_held_outcomes(self);
  for (auto& m : res.messages)
    st.ready.push(std::move(m));
  if (st.stopping || st.paused) {
    release_ready(self); // the claim was in flight when the stop or pause came: these go back
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

void on_claim_failed(consumer_ptr self, const caf::error& err) {
  auto& st = self->state;
  // Its messages may have started. Those not started are dropped (the recovery hands them back
  // if they are ours after all). When the database refused the claim, it was rolled back and
  // the started ones' outcomes are dropped too; when the connection was lost or the reply did
  // not come, it may have committed: their outcomes are held until the recovery knows which
  // of them it committed (only those are written).
  bool unknown = err.category() != caf::atom("troupe") ||
                 static_cast<errc>(err.code()) == errc::connection_lost ||
                 static_cast<errc>(err.code()) == errc::bug;
  if (st.claims.state() == claim_tracker::phase::locked) {
    st.slots->take_back_all(st.ready);
    auto unstarted = st.ready.take_claim(st.claims.current());
    if (unknown)
      st.uncertain_unstarted = std::move(unstarted);
  }
  st.claims.failed(unknown ? claim_tracker::failure::unknown : claim_tracker::failure::rolled_back);
  send_held_outcomes(self);
  if (!st.stopping)
    dispatch(self);
  log().warn("claim failed queue={} statement=claim_lock error={}; retrying in {}ms",
             st.settings.queue.name, describe(err), st.claims.backoff().count());
  recover_after_failed_claim(self);
  if (st.stopping || st.paused)
    release_ready(self); // the stop or the pause left them for this claim's end
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
    s.claims.hold_off(steady_clock::now());
    if (!s.stopping)
      schedule_wake(self, s.claims.backoff()); // maybe_claim tries the recovery again
  };
  // The flush waits for the batcher's write, which a statement timeout bounds; a minute is
  // far past it, and then the recovery is tried again after the backoff.
  self->request(st.settings.batcher, minutes(1), flush_atom_v)
    .then(
      [=](std::int64_t) {
        auto& s = self->state;
        auto held = s.claims.completed_during_recovery();
        s.slots->ids(held);
        s.ready.ids(held);
        // The claim whose commit is unknown: which of its started messages did it commit?
        std::vector<storage::claimed_message> started;
        std::vector<std::string> running;
        std::size_t ran = 0; // the first `ran` of `started` did start
        if (auto claim = s.claims.uncertain()) {
          for (auto& m : s.slots->of_claim(*claim)) {
            running.push_back(m.id);
            started.push_back(std::move(m));
          }
          for (auto& [id, attempt] : s.claims.held_attempts()) {
            held.push_back(id);
            storage::claimed_message m;
            m.id = id;
            m.attempt = attempt;
            started.push_back(std::move(m));
          }
          ran = started.size();
          // Never started: not held (handed back if the claim committed), but locked too.
          for (const auto& m : s.uncertain_unstarted)
            started.push_back(m);
        }
        self
          ->request(s.settings.storage, seconds(30), recover_atom_v, s.settings.node_id,
                    s.settings.queue.name, held, started)
          .then(
            [=](storage::recovery_result& r) {
              auto& s2 = self->state;
              if (s2.claims.uncertain()) {
                std::set<std::string> committed(r.committed.begin(), r.committed.end());
                auto lost = std::count_if(
                  started.begin(), started.begin() + ran,
                  [&](const storage::claimed_message& m) { return !committed.contains(m.id); });
                if (lost > 0)
                  log().info("{} started message(s) of a claim whose commit was lost never "
                             "committed: their outcomes are dropped queue={}",
                             lost, s2.settings.queue.name);
                for (auto& out : s2.claims.resolve_uncertain(r.committed, running))
                  send_outcome(self, std::move(out));
                s2.uncertain_unstarted.clear();
              }
              s2.claims.recovery_done();
              if (r.handed_back > 0)
                log().info("{} message(s) of a claim whose reply was lost were handed back "
                           "queue={} statement=recover_unheld",
                           r.handed_back, s2.settings.queue.name);
              finish_stop_if_idle(self);
              s2.claims.hold_off(steady_clock::now()); // the next claim waits the backoff
              if (!s2.stopping)
                schedule_wake(self, s2.claims.backoff());
            },
            [=](caf::error& err) { retry_later("handing back after a failed claim", err); });
      },
      [=](caf::error& err) { retry_later("the flush before a recovery", err); });
}

} // namespace

void send_held_outcomes(consumer_ptr self) {
  for (auto& out : self->state.claims.take_held())
    send_outcome(self, std::move(out));
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
  if (st.settings.metrics)
    st.settings.metrics->claimed(st.settings.metrics_queue, msgs.size());
  for (auto& m : msgs) {
    m.claim = claim;
    st.ready.push(std::move(m));
  }
  st.note_load();
  if (!st.stopping) // else they are handed back once the claim is written (also when paused)
    dispatch(self);
}

void maybe_claim(consumer_ptr self) {
  auto& st = self->state;
  st.note_load();
  if (st.stopping || !st.lock_held)
    return; // without the liveness lock, nothing is claimed (and no recovery runs)
  if (st.paused && st.claims.state() != claim_tracker::phase::must_recover)
    return; // a paused queue gives nothing anyway: no claim asks
  // After a failure, nothing begins before the backoff has passed, whatever woke the consumer;
  // a wake is due when it has.
  if (auto wait = st.claims.held_off_for(steady_clock::now()); wait.count() > 0) {
    schedule_wake(self, wait);
    return;
  }
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
  auto free_executors = st.settings.queue.concurrency - st.slots->running() -
                        static_cast<std::int32_t>(st.ready.size());
  auto idle = std::max<std::int32_t>(1, free_executors);
  // Those start the moment they come, unless the node cannot start anything now.
  auto starting = may_start(st) ? std::max<std::int32_t>(0, free_executors) : 0;
  auto generation = st.claims.generation();
  auto claim = st.claims.begin(rows);
  self
    ->request(st.settings.storage, seconds(30), claim_atom_v, st.settings.queue.name,
              st.settings.node_id, rows, idle, starting, claim)
    .then([=](storage::claim_result& res) { on_claimed(self, idle, generation, res); },
          [=](caf::error& err) { on_claim_failed(self, err); });
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

} // namespace troupe::actors::detail
