#include "actors/completion_batcher.hpp"

#include "actors/execute.hpp"
#include "troupe/log.hpp"

#include <algorithm>
#include <deque>
#include <memory>

namespace troupe::actors {

namespace {

using namespace std::chrono;

// An outcome and its arrival number: outcomes are settled (written, or refused because the
// node no longer owned the delivery) in arrival order, so "settled >= n" means every outcome
// up to n is settled.
struct numbered_outcome {
  std::int64_t seq = 0;
  storage::outcome outcome;
  bool replaced = false;      // already turned into a failure record once (see isolate)
  caf::strong_actor_ptr from; // told once the outcome is settled (a consumer's backpressure)
};

// Tells each sender of `settled` how many of its outcomes are settled: one message per sender.
void tell_senders(const std::vector<caf::strong_actor_ptr>& settled) {
  std::vector<std::pair<caf::strong_actor_ptr, std::int64_t>> counts;
  for (const auto& from : settled) {
    if (!from)
      continue;
    auto i =
      std::find_if(counts.begin(), counts.end(), [&](const auto& c) { return c.first == from; });
    if (i == counts.end())
      counts.emplace_back(from, 1);
    else
      ++i->second;
  }
  for (auto& [to, n] : counts)
    caf::anon_send(caf::actor_cast<caf::actor>(to), settled_atom_v, n);
}

struct flush_waiter {
  std::int64_t up_to = 0;
  caf::typed_response_promise<std::int64_t> promise;
};

struct batcher_state {
  static inline const char* name = "troupe.completion_batcher";
  batcher_settings settings;
  std::deque<numbered_outcome> held;
  std::int64_t received = 0;
  std::int64_t settled = 0;
  std::int64_t written = 0;
  bool flushing = false;
  bool timer_armed = false;
  // After a write the database refused for a reason other than a lost connection (an outcome
  // it cannot store), the next outcomes are written one by one to find the culprit.
  std::int64_t isolate = 0;
  milliseconds backoff{0};
  std::vector<flush_waiter> waiting;
  // Outcomes up to this arrival number were of deliveries taken back while the node was
  // declared dead: dropped, never written.
  std::int64_t void_up_to = 0;
};

using batcher_ptr = batcher_actor::stateful_pointer<batcher_state>;

void flush(batcher_ptr self);
void answer_waiters(batcher_ptr self);

// Drops the held outcomes of deliveries taken back from the node (see void_up_to); they count
// as settled.
void drop_void(batcher_ptr self) {
  auto& st = self->state;
  std::vector<caf::strong_actor_ptr> dropped;
  auto i = std::remove_if(st.held.begin(), st.held.end(), [&](numbered_outcome& n) {
    if (n.seq > st.void_up_to)
      return false;
    dropped.push_back(n.from);
    return true;
  });
  st.held.erase(i, st.held.end());
  if (dropped.empty())
    return;
  log().warn("dropping {} outcome(s): the node was declared dead while it had no lock and their "
             "messages went back to their queues node={}",
             dropped.size(), st.settings.node_id);
  st.settled += static_cast<std::int64_t>(dropped.size());
  tell_senders(dropped);
  answer_waiters(self);
}

void answer_waiters(batcher_ptr self) {
  auto& st = self->state;
  auto i = std::remove_if(st.waiting.begin(), st.waiting.end(), [&](flush_waiter& w) {
    if (st.settled < w.up_to)
      return false;
    w.promise.deliver(st.written);
    return true;
  });
  st.waiting.erase(i, st.waiting.end());
}

void arm_timer(batcher_ptr self, milliseconds after) {
  auto& st = self->state;
  if (st.timer_armed)
    return;
  st.timer_armed = true;
  self->delayed_send(self, after, poll_atom_v);
}

// The database refused one outcome on its own: store a failure record that says so instead
// (its text is plain JSON-escaped UTF-8, which PostgreSQL always accepts). A replacement that
// is refused too is given up, loudly: the message stays with this node until it stops, and is
// then recovered elsewhere.
void replace_refused(batcher_ptr self, numbered_outcome& n, const caf::error& err) {
  auto& st = self->state;
  if (n.replaced) {
    log().error("outcome of message {} cannot be written even as a failure record ({}); giving "
                "it up node={} statement=complete_batch",
                n.outcome.id, describe(err), st.settings.node_id);
    ++st.settled;
    tell_senders({n.from});
    return;
  }
  log().error("outcome of message {} was refused by the database ({}); storing a failure "
              "record instead node={} statement=complete_batch",
              n.outcome.id, describe(err), st.settings.node_id);
  n.outcome.state = storage::outcome_state::failed;
  n.outcome.result_json.clear();
  n.outcome.follow_ups.clear(); // a callback must not announce an outcome that was not stored
  n.outcome.error_json =
    failure_record("troupe::outcome_not_storable",
                   "the task's outcome could not be stored: " + describe(err), n.outcome.attempt);
  n.replaced = true;
  st.held.push_front(std::move(n));
}

void flush(batcher_ptr self) {
  auto& st = self->state;
  if (st.flushing || st.held.empty()) {
    answer_waiters(self);
    return;
  }
  auto limit = st.isolate > 0 ? std::size_t{1} : static_cast<std::size_t>(st.settings.batch_size);
  auto n = std::min(st.held.size(), limit);
  std::vector<numbered_outcome> taken(std::make_move_iterator(st.held.begin()),
                                      std::make_move_iterator(st.held.begin() + n));
  st.held.erase(st.held.begin(), st.held.begin() + n);
  std::vector<storage::outcome> batch;
  batch.reserve(n);
  for (const auto& t : taken)
    batch.push_back(t.outcome);
  st.flushing = true;
  auto sent = static_cast<std::int64_t>(n);
  // The senders, to tell them once this batch is settled (shared: the error path keeps `taken`).
  auto senders = std::make_shared<std::vector<caf::strong_actor_ptr>>();
  senders->reserve(n);
  for (const auto& t : taken)
    senders->push_back(t.from);
  self->request(st.settings.storage, seconds(30), complete_atom_v, st.settings.node_id, batch)
    .then(
      [=](std::int64_t written) {
        tell_senders(*senders);
        auto& s = self->state;
        s.flushing = false;
        s.backoff = milliseconds{0};
        s.written += written;
        s.settled += sent;
        if (s.settings.metrics)
          s.settings.metrics->flushed(static_cast<std::size_t>(sent));
        if (s.isolate > 0)
          s.isolate -= sent;
        if (written < sent)
          log().info("{} of {} completions refused: the node no longer owned those deliveries "
                     "(recovered elsewhere) node={} statement=complete_batch",
                     sent - written, sent, s.settings.node_id);
        answer_waiters(self);
        if (!s.held.empty())
          flush(self);
      },
      [=, taken = std::move(taken)](caf::error& err) mutable {
        auto& s = self->state;
        s.flushing = false;
        // A lost connection or a transient conflict (deadlock, serialization failure): the
        // same batch is tried again. Anything else means the database refuses its content.
        bool connection = err.category() == caf::atom("troupe") &&
                          (static_cast<errc>(err.code()) == errc::connection_lost ||
                           static_cast<errc>(err.code()) == errc::retryable);
        bool timeout = err == caf::sec::request_timeout;
        if (!connection && !timeout && taken.size() == 1) {
          replace_refused(self, taken.front(), err);
          answer_waiters(self);
          flush(self);
          return;
        }
        if (!connection && !timeout)
          s.isolate = static_cast<std::int64_t>(taken.size());
        for (auto i = taken.rbegin(); i != taken.rend(); ++i)
          s.held.push_front(std::move(*i));
        drop_void(self);
        s.backoff =
          std::min(milliseconds{5000}, s.backoff.count() == 0 ? milliseconds{50} : s.backoff * 2);
        log().warn("writing {} completions failed node={} statement=complete_batch error={}; "
                   "retrying in {}ms{}",
                   sent, s.settings.node_id, describe(err), s.backoff.count(),
                   s.isolate > 0 ? " one by one" : "");
        arm_timer(self, s.backoff);
      });
}

// A function with arguments, not a capturing lambda: CAF 0.17 dereferences a null argument
// tuple when it spawns a function object without arguments (UBSan reports it).
batcher_actor::behavior_type batcher_impl(batcher_ptr self, batcher_settings settings) {
  self->state.settings = std::move(settings);
  self->set_default_handler(
    [](caf::scheduled_actor*, caf::message_view& x) -> caf::result<caf::message> {
      log().warn("completion batcher: unexpected message {}", caf::to_string(x.content()));
      return caf::sec::unexpected_message;
    });
  return {
    [=](complete_atom, storage::outcome& o) {
      auto& st = self->state;
      st.held.push_back(
        numbered_outcome{++st.received, std::move(o), false, self->current_sender()});
      if (st.held.size() >= static_cast<std::size_t>(st.settings.batch_size))
        flush(self);
      else
        arm_timer(self, st.settings.flush_interval);
    },
    [=](flush_atom) -> caf::typed_response_promise<std::int64_t> {
      auto& st = self->state;
      auto rp = self->make_response_promise<std::int64_t>();
      st.waiting.push_back(flush_waiter{st.received, rp});
      answer_waiters(self);
      flush(self);
      return rp;
    },
    [=](liveness_atom, bool held, bool reaped) {
      if (!held || !reaped)
        return;
      self->state.void_up_to = self->state.received;
      drop_void(self);
    },
    [=](poll_atom) {
      self->state.timer_armed = false;
      flush(self);
    },
  };
}

} // namespace

batcher_actor spawn_completion_batcher(caf::actor_system& sys, batcher_settings settings) {
  return sys.spawn(batcher_impl, std::move(settings));
}

} // namespace troupe::actors
