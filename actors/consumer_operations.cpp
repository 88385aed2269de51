// The operations side of the consumer: a pause of its queue, cancel requests for the messages
// it holds, and the starts of long attempts written to their rows.
#include "actors/consumer_state.hpp"

#include "troupe/log.hpp"

#include <algorithm>
#include <set>

namespace troupe::actors::detail {

using namespace std::chrono;

namespace {

// How long an attempt runs before its start is written to its row: one that ends sooner gets
// its start with its outcome, in the same write.
constexpr milliseconds start_write_delay{1000};

} // namespace

void on_pause(consumer_ptr self, bool paused) {
  auto& st = self->state;
  if (st.paused == paused)
    return;
  st.paused = paused;
  if (paused) {
    log().info("queue={} is paused: nothing more starts, prefetched messages go back",
               st.settings.queue.name);
    st.slots->take_back_all(st.ready); // sent to executors but not started
    release_ready(self);               // with a claim in flight, once it ends
    return;
  }
  log().info("queue={} is resumed", st.settings.queue.name);
  if (st.stopping)
    return;
  st.claims.something_changed();
  dispatch(self);
  maybe_claim(self);
}

void on_cancels(consumer_ptr self, const std::vector<std::string>& ids) {
  auto& st = self->state;
  std::set<std::string> running;
  std::set<std::string> held;
  for (std::size_t i = 0; i < st.slots->size(); ++i) {
    const auto& s = (*st.slots)[i];
    if (s.running)
      running.insert(s.running->id);
    for (const auto& q : s.queued)
      held.insert(q.message.id);
  }
  bool behind = false;
  for (const auto& id : ids) {
    st.cancels->request(id); // a running attempt's task sees it now
    behind = behind || held.contains(id);
  }
  // Queued behind a running message: back to ready first. What an executor started meanwhile
  // stays with it, and its task sees the request: either it never runs or it is told.
  if (behind)
    st.slots->take_back_all(st.ready);
  for (const auto& id : ids) {
    if (auto m = st.ready.take(id)) {
      log().info("message={} cancelled before it started queue={}", id, st.settings.queue.name);
      st.cancels->forget(id);
      storage::outcome out;
      out.id = id;
      out.attempt = m->attempt;
      out.state = storage::outcome_state::cancelled;
      out.ran_ms = -1; // never started: the claim's attempt is taken back
      st.claims.outcome_pending();
      if (st.claims.must_hold(m->claim))
        st.claims.hold(std::move(out));
      else
        send_outcome(self, std::move(out));
    } else if (!running.contains(id) && !held.contains(id)) {
      // Not held here (any more): the next poll says again if it is. One queued behind a
      // running message may be starting right now: its request stays until it settles.
      st.cancels->forget(id);
    }
  }
  if (behind && !st.stopping)
    dispatch(self);
  else if (st.stopping)
    finish_stop_if_idle(self);
}

void arm_starts_timer(consumer_ptr self) {
  auto& st = self->state;
  if (st.starts_timer)
    return;
  st.starts_timer = true;
  self->delayed_send(self, start_write_delay, starts_atom_v);
}

namespace {

// The latest progress of each running attempt whose start is written (a row that says "not
// started" takes none: its start comes with this tick's starts or a later one), in one write.
void write_progress(consumer_ptr self) {
  auto& st = self->state;
  std::vector<storage::progress_update> updates;
  for (std::size_t i = 0; i < st.slots->size(); ++i) {
    auto& s = (*st.slots)[i];
    if (!s.running || !s.start_written)
      continue;
    if (auto p = st.cancels->take_progress(s.running->id))
      updates.push_back(storage::progress_update{s.running->id, s.running->attempt, *p});
  }
  if (updates.empty())
    return;
  auto count = updates.size();
  self
    ->request(st.settings.storage, seconds(30), progress_atom_v, st.settings.node_id,
              std::move(updates))
    .then([](std::int64_t) {},
          [=](caf::error& err) {
            // Progress is a report, not a promise: dropped, the task goes on, and its next
            // report (or its outcome) writes a later value.
            log().warn("could not write the progress of {} attempt(s) queue={}: {}", count,
                       self->state.settings.queue.name, describe(err));
          });
}

} // namespace

void on_progress(consumer_ptr self) {
  arm_starts_timer(self);
}

void write_starts(consumer_ptr self) {
  auto& st = self->state;
  auto now = steady_clock::now();
  std::vector<storage::started_attempt> due;
  bool later = false;
  for (std::size_t i = 0; i < st.slots->size(); ++i) {
    auto& s = (*st.slots)[i];
    if (!s.running || s.start_written)
      continue;
    auto ran = duration_cast<milliseconds>(now - s.started);
    if (ran < start_write_delay) {
      later = true;
      continue;
    }
    // The claim of a message whose claim is not written yet (its outcome would be held): the
    // row is still queued, and the write would find nothing; the next tick tries again.
    if (st.claims.must_hold(s.running->claim)) {
      later = true;
      continue;
    }
    s.start_written = true;
    due.push_back(storage::started_attempt{s.running->id, s.running->attempt, ran.count()});
  }
  if (later)
    arm_starts_timer(self);
  write_progress(self);
  if (due.empty())
    return;
  auto count = due.size();
  self
    ->request(st.settings.storage, seconds(30), mark_started_atom_v, st.settings.node_id,
              std::move(due))
    .then([](std::int64_t) {},
          [=](caf::error& err) {
            // The row says "not started" a while longer: a crash now would hand the message
            // back as if never claimed. The outcome, when it comes, writes the start anyway.
            log().warn("could not write the start of {} attempt(s) queue={}: {}", count,
                       self->state.settings.queue.name, describe(err));
          });
}

void confirm_starts(consumer_ptr self) {
  auto& st = self->state;
  st.confirm_timer = false;
  auto asked = st.cancels->take_start_requests();
  asked.insert(asked.end(), st.parked_starts.begin(), st.parked_starts.end());
  st.parked_starts.clear();
  std::vector<start_request> now;
  for (auto& r : asked)
    // A claim in two steps hands its messages out before it commits: their rows are running
    // (and the write finds them) only once its reply came.
    (st.claims.must_hold(r.claim) ? st.parked_starts : now).push_back(std::move(r));
  if (!st.parked_starts.empty() && !st.confirm_timer) {
    st.confirm_timer = true;
    self->delayed_send(self, milliseconds(20), confirm_start_atom_v);
  }
  if (now.empty())
    return;
  std::vector<storage::started_attempt> due;
  for (const auto& r : now)
    due.push_back(storage::started_attempt{r.id, r.attempt, 0});
  self
    ->request(st.settings.storage, seconds(30), confirm_start_atom_v, st.settings.node_id,
              std::move(due))
    .then(
      [=](const std::vector<std::string>& written) {
        auto& st = self->state;
        for (const auto& r : now) {
          bool ok = std::find(written.begin(), written.end(), r.id) != written.end();
          if (ok)
            for (std::size_t i = 0; i < st.slots->size(); ++i) {
              auto& s = (*st.slots)[i];
              if (s.running && s.running->id == r.id && s.running->attempt == r.attempt)
                s.start_written = true;
            }
          st.cancels->settle_start(r, ok ? start_verdict::written : start_verdict::not_ours);
        }
      },
      [=](caf::error& err) {
        log().warn("could not write the start of {} message(s) that came back from a dead node "
                   "queue={}: {}; they run, their starts come with their outcomes",
                   now.size(), self->state.settings.queue.name, describe(err));
        for (const auto& r : now)
          self->state.cancels->settle_start(r, start_verdict::unknown);
      });
}

} // namespace troupe::actors::detail
