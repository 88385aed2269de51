#include "actors/schedule_publisher.hpp"

#include "troupe/error.hpp"
#include "troupe/log.hpp"

#include <memory>

namespace troupe::actors {

namespace {

struct publisher_state {
  std::unique_ptr<scheduler> ticks;
  std::chrono::milliseconds poll{1000};
  std::int32_t batch = 100;
  bool failing = false;
};

using publisher_ptr = schedule_publisher_actor::stateful_pointer<publisher_state>;

// One tick; the delay until the next.
std::chrono::milliseconds tick(publisher_ptr self) {
  auto& st = self->state;
  try {
    auto done = st.ticks->tick();
    if (st.failing)
      log().info("scheduler: ticking again");
    st.failing = false;
    for (const auto& o : done)
      log().info("scheduler: schedule={} occurrence={} outcome={}{}{}", o.schedule, o.occurrence_ms,
                 o.outcome, o.message_id.empty() ? "" : " message=", o.message_id);
    if (done.size() >= static_cast<std::size_t>(st.batch))
      return std::chrono::milliseconds(0);
  } catch (const std::exception& e) {
    // Logged once per run of failures: a database that is away must not flood the log.
    if (!st.failing)
      log().warn("scheduler: tick failed: {} (retrying every {} ms)", e.what(), st.poll.count());
    st.failing = true;
  }
  return st.poll;
}

} // namespace

// A function with arguments, not a capturing lambda (CAF 0.17 and UBSan).
static schedule_publisher_actor::behavior_type publisher_impl(publisher_ptr self,
                                                              scheduler_options options) {
  auto& st = self->state;
  st.poll = options.poll;
  st.batch = options.batch;
  st.ticks = std::make_unique<scheduler>(std::move(options));
  self->set_default_handler(
    [](caf::scheduled_actor*, caf::message_view& x) -> caf::result<caf::message> {
      log().warn("scheduler: unexpected message {}", caf::to_string(x.content()));
      return caf::sec::unexpected_message;
    });
  self->send(self, poll_atom_v);
  return {
    [=](poll_atom) { self->delayed_send(self, tick(self), poll_atom_v); },
  };
}

schedule_publisher_actor spawn_schedule_publisher(caf::actor_system& sys,
                                                  scheduler_options options) {
  return sys.spawn<caf::detached>(publisher_impl, std::move(options));
}

} // namespace troupe::actors
