#include "actors/completion_batcher.hpp"

#include "troupe/log.hpp"

#include <deque>

namespace troupe::actors {

namespace {

using namespace std::chrono;

struct batcher_state {
  static inline const char* name = "troupe.completion_batcher";
  batcher_settings settings;
  std::deque<storage::outcome> held;
  bool flushing = false;
  bool timer_armed = false;
  milliseconds backoff{0};
  std::int64_t written = 0;
  std::vector<caf::typed_response_promise<std::int64_t>> waiting; // flush requests
};

using batcher_ptr = batcher_actor::stateful_pointer<batcher_state>;

void flush(batcher_ptr self);

void answer_waiters_if_empty(batcher_ptr self) {
  auto& st = self->state;
  if (st.flushing || !st.held.empty())
    return;
  for (auto& rp : st.waiting)
    rp.deliver(st.written);
  st.waiting.clear();
}

void arm_timer(batcher_ptr self, milliseconds after) {
  auto& st = self->state;
  if (st.timer_armed)
    return;
  st.timer_armed = true;
  self->delayed_send(self, after, poll_atom_v);
}

void flush(batcher_ptr self) {
  auto& st = self->state;
  if (st.flushing || st.held.empty()) {
    answer_waiters_if_empty(self);
    return;
  }
  auto n = std::min<std::size_t>(st.held.size(), static_cast<std::size_t>(st.settings.batch_size));
  std::vector<storage::outcome> batch(std::make_move_iterator(st.held.begin()),
                                      std::make_move_iterator(st.held.begin() + n));
  st.held.erase(st.held.begin(), st.held.begin() + n);
  st.flushing = true;
  auto sent = static_cast<std::int64_t>(batch.size());
  self->request(st.settings.storage, seconds(30), complete_atom_v, st.settings.node_id, batch)
    .then(
      [=](std::int64_t written) {
        auto& s = self->state;
        s.flushing = false;
        s.backoff = milliseconds{0};
        s.written += written;
        if (written < sent)
          log().info("{} of {} completions refused: the node no longer owned those deliveries "
                     "(recovered elsewhere) node={} statement=complete_batch",
                     sent - written, sent, s.settings.node_id);
        if (!s.held.empty())
          flush(self);
        else
          answer_waiters_if_empty(self);
      },
      [=, batch = std::move(batch)](caf::error& err) mutable {
        auto& s = self->state;
        s.flushing = false;
        s.held.insert(s.held.begin(), std::make_move_iterator(batch.begin()),
                      std::make_move_iterator(batch.end()));
        s.backoff =
          std::min(milliseconds{5000}, s.backoff.count() == 0 ? milliseconds{50} : s.backoff * 2);
        log().warn("writing {} completions failed node={} statement=complete_batch error={}; "
                   "retrying in {}ms",
                   sent, s.settings.node_id, describe(err), s.backoff.count());
        arm_timer(self, s.backoff);
      });
}

} // namespace

// A function with arguments, not a capturing lambda: CAF 0.17 dereferences a null argument
// tuple when it spawns a function object without arguments (UBSan reports it).
static batcher_actor::behavior_type batcher_impl(batcher_ptr self, batcher_settings settings) {
  self->state.settings = std::move(settings);
  self->set_default_handler(
    [](caf::scheduled_actor*, caf::message_view& x) -> caf::result<caf::message> {
      log().warn("completion batcher: unexpected message {}", caf::to_string(x.content()));
      return caf::sec::unexpected_message;
    });
  return {
    [=](complete_atom, storage::outcome& o) {
      auto& st = self->state;
      st.held.push_back(std::move(o));
      if (st.held.size() >= static_cast<std::size_t>(st.settings.batch_size))
        flush(self);
      else
        arm_timer(self, st.settings.flush_interval);
    },
    [=](flush_atom) -> caf::typed_response_promise<std::int64_t> {
      auto rp = self->make_response_promise<std::int64_t>();
      self->state.waiting.push_back(rp);
      flush(self);
      return rp;
    },
    [=](poll_atom) {
      self->state.timer_armed = false;
      flush(self);
    },
  };
}

batcher_actor spawn_completion_batcher(caf::actor_system& sys, batcher_settings settings) {
  return sys.spawn(batcher_impl, std::move(settings));
}

} // namespace troupe::actors
