// Tasks implemented by typed actors (troupe::define_task_actor): the executor's side of one
// attempt. A hidden bridge actor in the task actor's own system sends the request and routes the
// answer back; the executor's thread waits for it and tells the task actor when to stop.
#include "troupe/caf.hpp"
#include "troupe/log.hpp"

#include <fmt/format.h>

namespace troupe {

namespace detail {

void task_reply::succeed(std::string result_json) {
  {
    std::lock_guard lock{mutex_};
    if (done_)
      return;
    result = std::move(result_json);
    done_ = true;
  }
  answered_.notify_all();
}

void task_reply::end(std::string why) {
  {
    std::lock_guard lock{mutex_};
    if (done_)
      return;
    ended = std::move(why);
    done_ = true;
  }
  answered_.notify_all();
}

void task_reply::fail(caf::error err) {
  {
    std::lock_guard lock{mutex_};
    if (done_)
      return;
    failure = std::move(err);
    done_ = true;
  }
  answered_.notify_all();
}

bool task_reply::wait_for(std::chrono::milliseconds limit) {
  std::unique_lock lock{mutex_};
  return answered_.wait_for(lock, limit, [&] { return done_; });
}

void end_bridge(caf::event_based_actor* self, const caf::actor& target) {
  self->demonitor(target);
  self->quit();
}

namespace {

// How often the waiting executor looks at its attempt's stop conditions (a cancel is seen
// within a second anyway).
constexpr std::chrono::milliseconds stop_check_period{50};

// How long past its time limit an executor waits for a task actor that does not answer. The
// node abandons the attempt well before (time limit plus node.time-limit-grace); this bounds
// how long the abandoned executor's thread lives on.
constexpr std::chrono::minutes answer_bound_past_limit{10};

// The attempt's bridge: sends the request, passes on the executor's stop (after the request,
// since messages from one sender keep their order), and answers the reply when the task actor
// answers or ends first; then it stops watching the task actor and ends. Hidden, so that an
// attempt still waiting never holds up its actor system's shutdown.
caf::behavior bridge_impl(caf::event_based_actor* self, caf::actor target, task_call call,
                          std::shared_ptr<task_reply> reply, task_request request) {
  self->monitor(target);
  self->set_down_handler([=](caf::down_msg& dm) {
    if (dm.source != target.address())
      return;
    reply->end(
      fmt::format("the task actor ended before it answered ({})", caf::to_string(dm.reason)));
    self->quit();
  });
  // The executor gave up waiting.
  self->set_exit_handler([=](caf::exit_msg& em) {
    self->demonitor(target);
    self->quit(em.reason);
  });
  request(self, call, reply);
  return {
    [=](stop_atom, task_stop& stop) { self->send(target, stop_atom_v, std::move(stop)); },
  };
}

// Why the attempt should stop now, or empty.
std::string stop_reason(const task_context& ctx) {
  if (std::chrono::steady_clock::now() >= ctx.deadline)
    return "time_limit";
  if (ctx.cancel_requested())
    return "cancelled";
  if (ctx.notify_shutdown && ctx.shutting_down && ctx.shutting_down->load())
    return "shutdown";
  return {};
}

[[noreturn]] void throw_failure(const caf::error& err, const std::string& stopped_for) {
  auto text = describe(err);
  // After a stop, an error answer is the stop taking effect: the attempt fails as a task that
  // let check()'s exception through would.
  if (stopped_for == "time_limit")
    throw time_limit_exceeded("the task actor stopped at its time limit: " + text);
  if (stopped_for == "cancelled")
    throw cancellation_requested("the task actor stopped for the message's cancel: " + text);
  if (stopped_for == "shutdown")
    throw shutdown_requested("the task actor stopped for the node's shutdown: " + text);
  // A Troupe error (make_caf_error) fails the attempt as the same troupe::error thrown would.
  if (err.category() == caf::atom("troupe")) {
    std::string reason;
    if (err.context().match_elements<std::string>())
      reason = err.context().get_as<std::string>(0);
    throw error(static_cast<errc>(err.code()), reason);
  }
  throw task_actor_error("the task actor answered with an error: " + text);
}

} // namespace

std::string await_task_actor(task_context& ctx, const caf::actor& target,
                             const task_request& request) {
  auto now = std::chrono::steady_clock::now();
  auto left =
    ctx.deadline == std::chrono::steady_clock::time_point::max()
      ? std::int64_t{-1}
      : std::max<std::int64_t>(
          std::chrono::duration_cast<std::chrono::milliseconds>(ctx.deadline - now).count(), 0);
  task_call call{ctx.message_id, ctx.queue, ctx.task, ctx.attempt, left, ctx.options_json};
  auto reply = std::make_shared<task_reply>();
  auto& sys = target->home_system();
  auto bridge = sys.spawn<caf::hidden>(bridge_impl, target, call, reply, request);
  auto give_up_at = ctx.deadline == std::chrono::steady_clock::time_point::max()
                      ? ctx.deadline
                      : ctx.deadline + answer_bound_past_limit;
  std::string stopped_for;
  while (!reply->wait_for(stop_check_period)) {
    if (stopped_for.empty()) {
      stopped_for = stop_reason(ctx);
      if (!stopped_for.empty())
        caf::anon_send(bridge, stop_atom_v, task_stop{ctx.message_id, ctx.attempt, stopped_for});
    }
    if (std::chrono::steady_clock::now() >= give_up_at) {
      caf::anon_send_exit(bridge, caf::exit_reason::user_shutdown);
      throw time_limit_exceeded(
        fmt::format("the task actor did not answer within {} minutes past its time limit",
                    answer_bound_past_limit.count()));
    }
  }
  if (reply->result)
    return std::move(*reply->result);
  if (!reply->ended.empty())
    throw task_actor_error(reply->ended);
  throw_failure(reply->failure, stopped_for);
}

} // namespace detail

} // namespace troupe
