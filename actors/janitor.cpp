#include "actors/janitor.hpp"

#include "storage/queries.hpp"
#include "troupe/log.hpp"

#include <random>

namespace troupe::actors {

namespace {

using namespace std::chrono;

struct janitor_state {
  static inline const char* name = "troupe.janitor";
  janitor_settings settings;
  bool pass_running = false;
  bool vacuum_running = false;
  bool vacuum_refused = false; // this role may not vacuum the queue table
  // After a failed vacuum (its 30 s timeout, say, on a very large table) the next waits, a
  // minute at first and up to ten, so that a vacuum that cannot finish does not run on and on.
  steady_clock::time_point vacuum_not_before{};
  milliseconds vacuum_backoff{0};
  std::minstd_rand rng{std::random_device{}()};

  milliseconds next_delay() {
    auto base = settings.interval.count();
    std::uniform_int_distribution<long> d(-base / 10, base / 10);
    return milliseconds{base + d(rng)};
  }
};

using janitor_ptr = janitor_actor::stateful_pointer<janitor_state>;

void report(janitor_ptr self, const storage::reap_report& r) {
  if (r.suspect_nodes > 0)
    log().info("janitor: {} node(s) lost their liveness lock; dead unless it comes back within "
               "{}ms",
               r.suspect_nodes, self->state.settings.dead_node_grace.count());
  // The pass's own notification wakes those queues on every node, this one included.
  if (r.dead_nodes > 0 || r.recovered > 0)
    log().info("janitor: {} dead node(s) removed, {} message(s) put back in their queues ({})",
               r.dead_nodes, r.recovered, fmt::join(r.queues, ","));
}

void maybe_vacuum(janitor_ptr self) {
  auto& st = self->state;
  if (st.vacuum_running || st.vacuum_refused || st.settings.vacuum_dead_rows <= 0 ||
      !st.settings.upkeep || steady_clock::now() < st.vacuum_not_before)
    return;
  st.vacuum_running = true;
  auto started = steady_clock::now();
  self
    ->request(st.settings.upkeep, minutes(2), vacuum_atom_v,
              static_cast<std::int64_t>(st.settings.vacuum_dead_rows))
    .then(
      [=](std::int64_t dead) {
        self->state.vacuum_running = false;
        self->state.vacuum_backoff = milliseconds{0};
        if (dead == storage::vacuum_not_allowed) {
          self->state.vacuum_refused = true;
          log().warn("janitor: this node's role may not vacuum the queue table (it must own "
                     "the table or the database); leaving it to autovacuum. Set "
                     "node.vacuum-dead-rows=0 to silence this");
          return;
        }
        if (dead >= 0)
          log().info("janitor: vacuumed the queue table ({} dead row versions) in {}ms", dead,
                     duration_cast<milliseconds>(steady_clock::now() - started).count());
      },
      [=](caf::error& err) {
        auto& s = self->state;
        s.vacuum_running = false;
        s.vacuum_backoff = std::min<milliseconds>(minutes(10), s.vacuum_backoff.count() == 0
                                                                 ? milliseconds{minutes(1)}
                                                                 : s.vacuum_backoff * 2);
        s.vacuum_not_before = steady_clock::now() + s.vacuum_backoff;
        log().warn("janitor: vacuum failed statement=vacuum_queue error={}; next try in {}s",
                   describe(err), duration_cast<seconds>(s.vacuum_backoff).count());
      });
}

// The changes to the finished counts are added up, and results past their result_ttl are
// cleared, up to 1,000 per pass. The pass ends with it.
void tidy(janitor_ptr self) {
  self->request(self->state.settings.storage, seconds(30), tidy_atom_v, std::int32_t{1000})
    .then(
      [=](std::int64_t gone) {
        self->state.pass_running = false;
        if (gone > 0)
          log().info("janitor: cleared {} result(s) past their result_ttl", gone);
      },
      [=](caf::error& err) {
        self->state.pass_running = false;
        log().warn("janitor: counts and result expiry failed "
                   "statement=fold_state_counts+expire_results error={}",
                   describe(err));
      });
}

// The retention part of a pass (areas from migration 5 on): finished rows past their state's
// window go, a bounded batch per pass, then the tidying up.
void maybe_purge(janitor_ptr self) {
  auto& st = self->state;
  const auto& k = st.settings.keep;
  bool operations = st.settings.statements && st.settings.statements->version() >= 5;
  if (!operations) {
    st.pass_running = false;
    return;
  }
  if (k.done_ms <= 0 && k.failed_ms <= 0 && k.cancelled_ms <= 0) {
    tidy(self);
    return;
  }
  self
    ->request(st.settings.storage, seconds(30), purge_atom_v, k.done_ms, k.failed_ms,
              k.cancelled_ms)
    .then(
      [=](std::int64_t gone) {
        if (gone > 0)
          log().info("janitor: purged {} finished row(s) past their retention", gone);
        tidy(self);
      },
      [=](caf::error& err) {
        log().warn("janitor: retention pass failed statement=purge_finished error={}",
                   describe(err));
        tidy(self);
      });
}

} // namespace

// A function with arguments, not a capturing lambda: CAF 0.17 dereferences a null argument
// tuple when it spawns a function object without arguments (UBSan reports it).
static janitor_actor::behavior_type janitor_impl(janitor_ptr self, janitor_settings settings) {
  self->state.settings = std::move(settings);
  if (self->state.settings.upkeep)
    self->link_to(self->state.settings.upkeep);
  self->set_default_handler(
    [](caf::scheduled_actor*, caf::message_view& x) -> caf::result<caf::message> {
      log().warn("janitor: unexpected message {}", caf::to_string(x.content()));
      return caf::sec::unexpected_message;
    });
  self->send(self, poll_atom_v);
  return {
    [=](poll_atom) {
      auto& st = self->state;
      self->delayed_send(self, st.next_delay(), poll_atom_v);
      maybe_vacuum(self);
      if (st.pass_running)
        return;
      st.pass_running = true;
      self
        ->request(st.settings.storage, seconds(30), reap_atom_v,
                  static_cast<std::int64_t>(st.settings.dead_node_grace.count()))
        .then(
          [=](const storage::reap_report& r) {
            report(self, r);
            maybe_purge(self);
          },
          [=](caf::error& err) {
            self->state.pass_running = false;
            log().warn("janitor pass failed statement=reap_dead_nodes error={}", describe(err));
          });
    },
    [=](reap_atom) -> caf::typed_response_promise<storage::reap_report> {
      auto rp = self->make_response_promise<storage::reap_report>();
      self
        ->request(self->state.settings.storage, seconds(30), reap_atom_v,
                  static_cast<std::int64_t>(self->state.settings.dead_node_grace.count()))
        .then(
          [=](const storage::reap_report& r) mutable {
            report(self, r);
            rp.deliver(r);
          },
          [=](caf::error& err) mutable { rp.deliver(std::move(err)); });
      return rp;
    },
  };
}

janitor_actor spawn_janitor(caf::actor_system& sys, janitor_settings settings) {
  return sys.spawn(janitor_impl, std::move(settings));
}

} // namespace troupe::actors
