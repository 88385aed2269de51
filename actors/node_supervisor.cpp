#include "actors/node_supervisor.hpp"

#include "actors/metrics_endpoint.hpp"
#include "actors/node_children.hpp"
#include "troupe/log.hpp"

#include <unistd.h>

#include <algorithm>
#include <optional>

namespace troupe::actors {

namespace {

using namespace std::chrono;
using starts = node_child::starts;
using stops = node_child::stops;

struct supervisor_state {
  static inline const char* name = "troupe.node_supervisor";
  node_context node;
  std::vector<node_child> children;

  bool stopping = false;
  bool awaiting_down = false; // the stop waits for the await_down children
  bool delivered = false;     // the stop's reply went out
  bool ready = false;         // registered, and the consumers are claiming
  std::optional<caf::typed_response_promise<node_report>> stop_promise;
  std::vector<caf::typed_response_promise<node_report>> ready_waiters;
  std::size_t draining = 0;
  node_report final_report;

  node_child* child_of(const caf::actor_addr& who) {
    for (auto& c : children)
      if (c.handle && c.handle.address() == who)
        return &c;
    return nullptr;
  }
  node_report base_report() const {
    node_report r;
    r.node_id = node.node_id;
    r.name = node.identity.name;
    r.metrics_port = node.metrics_server ? node.metrics_server->port() : 0;
    return r;
  }
  std::vector<node_child*> consumers() {
    std::vector<node_child*> out;
    for (auto& c : children)
      if (!c.queue.empty() && c.handle)
        out.push_back(&c);
    return out;
  }
};

using supervisor_ptr = node_supervisor_actor::stateful_pointer<supervisor_state>;

// The node's name in the registry, its logs and its metrics: its configured one, else host:pid.
std::string node_name_of(const node_options& options) {
  if (!options.name.empty())
    return options.name;
  char host[256] = {};
  ::gethostname(host, sizeof(host) - 1);
  return std::string(host) + ":" + std::to_string(::getpid());
}

void spawn_child(supervisor_ptr self, node_child& c, bool replacing) {
  c.handle = c.spawn(self->system(), self->state.node, replacing);
  self->monitor(c.handle);
}

// node_start hooks in stack order, node_stop hooks in reverse; a failing hook is logged.
void run_node_hooks(supervisor_ptr self, bool starting) {
  auto& n = self->state.node;
  node_info info{n.node_id, n.identity.name};
  const auto& stack = n.tasks->middleware();
  auto run = [&](const middleware_ptr& m) {
    try {
      if (starting)
        m->node_start(info);
      else
        m->node_stop(info);
    } catch (const std::exception& e) {
      log().error("middleware {} failed in {} node={}: {}", m->name(),
                  starting ? "node_start" : "node_stop", n.node_id, e.what());
    } catch (...) {
      log().error("middleware {} failed in {} node={}", m->name(),
                  starting ? "node_start" : "node_stop", n.node_id);
    }
  };
  if (starting)
    std::for_each(stack.begin(), stack.end(), run);
  else
    std::for_each(stack.rbegin(), stack.rend(), run);
}

void answer_ready_waiters(supervisor_ptr self, const caf::error& err) {
  auto& st = self->state;
  for (auto& rp : st.ready_waiters) {
    if (err)
      rp.deliver(err);
    else
      rp.deliver(st.base_report());
  }
  st.ready_waiters.clear();
}

// What the node will run, said once at its start so that an operator reads it in the log:
// each queue with its executors and its tasks, the scheduler and the metrics endpoint.
void report_what_runs(const node_context& n) {
  for (const auto& q : n.options.queues)
    log().info("node runs queue={} concurrency={} prefetch={} poll={}ms tasks={}", q.name,
               q.concurrency, q.prefetch, q.poll_interval.count(),
               n.tasks ? fmt::format("{}", fmt::join(n.tasks->names_on(q.name), ","))
                       : std::string{});
  log().info("node scheduler={} metrics={}", n.options.scheduler.enabled ? "on" : "off",
             n.metrics_server
               ? fmt::format("{}:{}", n.options.metrics.bind, n.metrics_server->port())
               : std::string{"off"});
}

void start_registered_children(supervisor_ptr self) {
  auto& st = self->state;
  run_node_hooks(self, true); // before any consumer can start an attempt
  for (auto& c : st.children)
    if (c.when == starts::once_registered)
      spawn_child(self, c, false);
  st.ready = true;
  answer_ready_waiters(self, caf::error{});
  log().info("node started node={} name={} queues={}", st.node.node_id, st.node.identity.name,
             fmt::join(st.node.identity.queues, ","));
  report_what_runs(st.node);
  // What the node's tasks may take by key (limit_guard(ctx, key)).
  for (const auto& l : st.node.options.limits)
    log().info("node declares limiter key={} kind={} limit={}{}", l.key, to_string(l.kind),
               l.capacity,
               l.kind == limit_kind::concurrent ? std::string{}
                                                : fmt::format(" window={}ms", l.span.count()));
}

// Ends every child (in stop order); the listener deregisters the node on the way out.
void exit_children(supervisor_ptr self, const caf::error& reason) {
  for (auto& c : self->state.children)
    if (c.handle && c.stop != stops::await_down)
      self->send_exit(c.handle, reason);
  for (auto& c : self->state.children)
    if (c.handle && c.stop == stops::await_down)
      self->send_exit(c.handle, reason);
}

bool awaiting(const supervisor_state& st) {
  return std::any_of(st.children.begin(), st.children.end(),
                     [](const node_child& c) { return c.stop == stops::await_down && c.handle; });
}

void deliver_stop(supervisor_ptr self) {
  auto& st = self->state;
  if (st.delivered)
    return; // the last down message and the deadline can both arrive
  st.delivered = true;
  if (st.node.node_id != 0)
    run_node_hooks(self, false);
  st.final_report.node_id = st.node.node_id;
  st.final_report.name = st.node.identity.name;
  st.final_report.metrics_port = st.node.metrics_server ? st.node.metrics_server->port() : 0;
  log().info("node stopped node={} executed={} released={} abandoned={}", st.node.node_id,
             st.final_report.executed, st.final_report.released, st.final_report.abandoned);
  answer_ready_waiters(self, make_caf_error(errc::shutting_down, "the node stopped"));
  if (st.stop_promise) {
    st.stop_promise->deliver(st.final_report);
    st.stop_promise.reset();
  }
  self->quit();
}

// The last steps of a stop: flush, then exit every child, then wait for the await_down ones
// (or a deadline, if the database does not answer).
void finish_stop(supervisor_ptr self) {
  auto& st = self->state;
  auto exit_all = [=] {
    exit_children(self, caf::exit_reason::user_shutdown);
    if (awaiting(self->state)) {
      self->state.awaiting_down = true;
      self->delayed_send(self, seconds(10), deadline_atom_v);
      return;
    }
    deliver_stop(self);
  };
  auto flushing = std::find_if(st.children.begin(), st.children.end(), [](const node_child& c) {
    return c.stop == stops::flush && c.handle;
  });
  if (flushing == st.children.end()) {
    exit_all();
    return;
  }
  self->request(caf::actor_cast<batcher_actor>(flushing->handle), seconds(30), flush_atom_v)
    .then([=](std::int64_t) { exit_all(); },
          [=](caf::error& err) {
            log().error("final flush of completions failed node={}: {}", self->state.node.node_id,
                        describe(err));
            exit_all();
          });
}

void drained_one(supervisor_ptr self, const consumer_report& r, bool in_time) {
  auto& st = self->state;
  if (!in_time && r.running > 0)
    log().warn("{} task(s) of queue {} still running after the shutdown grace; abandoning them",
               r.running, r.queue);
  st.final_report.executed += r.executed;
  st.final_report.released += r.released;
  st.final_report.abandoned += r.stuck + (in_time ? 0 : r.running);
  if (--st.draining == 0)
    finish_stop(self);
}

void begin_stop(supervisor_ptr self) {
  auto& st = self->state;
  st.stopping = true;
  log().info("node stopping node={}: no new claims, {}ms for running tasks", st.node.node_id,
             st.node.options.shutdown_grace.count());
  std::vector<caf::actor> drain;
  for (auto& c : st.children)
    if (c.stop == stops::drain && c.handle)
      drain.push_back(c.handle);
  if (drain.empty()) {
    finish_stop(self);
    return;
  }
  st.draining = drain.size();
  for (auto& handle : drain) {
    auto consumer = caf::actor_cast<consumer_actor>(handle);
    self->request(consumer, st.node.options.shutdown_grace, stop_atom_v)
      .then([=](const consumer_report& r) { drained_one(self, r, true); },
            [=](caf::error&) {
              // The grace period ran out: count what is still running, and go on without it.
              self->request(consumer, seconds(5), status_atom_v)
                .then([=](const consumer_report& r) { drained_one(self, r, false); },
                      [=](caf::error&) { drained_one(self, consumer_report{}, false); });
            });
  }
}

void escalate(supervisor_ptr self, const std::string& what, const caf::error& reason) {
  auto& st = self->state;
  log().critical("{} died ({}); the node stops so that live nodes recover its messages", what,
                 caf::to_string(reason));
  exit_children(self, caf::exit_reason::user_shutdown);
  auto err = make_caf_error(errc::bug, what + " died");
  answer_ready_waiters(self, err);
  if (st.stop_promise)
    st.stop_promise->deliver(err);
  self->quit(make_caf_error(errc::bug, what + " died: " + caf::to_string(reason)));
}

void on_child_down(supervisor_ptr self, caf::down_msg& dm) {
  auto& st = self->state;
  auto* c = st.child_of(dm.source);
  if (c == nullptr)
    return;
  if (st.stopping) {
    auto stop = c->stop;
    c->handle = nullptr; // gone: the stop goes on without waiting for it
    if (stop == stops::await_down && st.awaiting_down && !awaiting(st))
      deliver_stop(self);
    return;
  }
  if (c->death == node_child::on_death::escalate) {
    escalate(self, c->name, dm.reason);
    return;
  }
  auto now = steady_clock::now();
  while (!c->restarts.empty() && now - c->restarts.front() > restart_window)
    c->restarts.pop_front();
  c->restarts.push_back(now);
  if (static_cast<int>(c->restarts.size()) > max_restarts) {
    escalate(self, c->name + " (restarted too often)", dm.reason);
    return;
  }
  log().error("{} died ({}); restarting it", c->name, caf::to_string(dm.reason));
  if (c->holds_lock && st.node.node_id != 0) {
    // Its session, and the node's lock with it, is gone: nothing starts until the new
    // listener has the lock again (it reports so).
    st.node.lock_held = false;
    for (auto* consumer : st.consumers())
      self->send(caf::actor_cast<consumer_actor>(consumer->handle), liveness_atom_v, false, false);
  }
  spawn_child(self, *c, true);
}

node_supervisor_actor::behavior_type supervisor_impl(supervisor_ptr self, node_options options,
                                                     std::shared_ptr<const task_registry> tasks,
                                                     metrics_endpoint endpoint) {
  auto& st = self->state;
  auto& n = st.node;
  n.options = std::move(options);
  n.tasks = std::move(tasks);
  n.statements = storage::make_statement_set(n.options.area);
  n.node = caf::actor_cast<node_supervisor_actor>(self);
  n.metrics = std::move(endpoint.metrics);
  n.metrics_server = std::move(endpoint.server);
  char host[256] = {};
  ::gethostname(host, sizeof(host) - 1);
  n.identity.host = host;
  n.identity.pid = static_cast<std::int32_t>(::getpid());
  n.identity.name = node_name_of(n.options);
  for (const auto& q : n.options.queues)
    n.identity.queues.push_back(q.name);
  if (n.tasks)
    n.identity.tasks = n.tasks->names();
  st.children = node_children(n.options);
  for (auto& c : st.children)
    if (c.when == starts::with_node)
      spawn_child(self, c, false);
  self->set_down_handler([=](caf::down_msg& dm) { on_child_down(self, dm); });
  self->set_exit_handler([=](caf::exit_msg& em) {
    exit_children(self, em.reason);
    answer_ready_waiters(self, make_caf_error(errc::shutting_down, "the node was stopped"));
    self->quit(em.reason);
  });
  self->set_default_handler(
    [](caf::scheduled_actor*, caf::message_view& x) -> caf::result<caf::message> {
      log().warn("node supervisor: unexpected message {}", caf::to_string(x.content()));
      return caf::sec::unexpected_message;
    });
  return {
    [=](registered_atom, std::int32_t id) {
      auto& s = self->state;
      if (s.node.node_id != 0)
        return;
      s.node.node_id = id;
      if (s.stopping)
        finish_stop(self);
      else
        start_registered_children(self);
    },
    [=](caf::get_atom, const std::string& queue) -> caf::result<consumer_actor> {
      for (auto* c : self->state.consumers())
        if (c->queue == queue)
          return caf::actor_cast<consumer_actor>(c->handle);
      return make_caf_error(errc::not_found, "this node does not consume queue " + queue);
    },
    [=](liveness_atom, bool held, bool reaped) {
      auto& s = self->state;
      s.node.lock_held = held;
      // The batcher first: outcomes of taken-back deliveries must be gone before any consumer
      // claims again.
      if (s.node.batcher)
        self->send(s.node.batcher, liveness_atom_v, held, reaped);
      for (auto* c : s.consumers())
        self->send(caf::actor_cast<consumer_actor>(c->handle), liveness_atom_v, held, reaped);
    },
    [=](control_atom, const std::vector<std::string>& paused,
        const std::vector<std::string>& cancel_queues, const std::vector<std::string>& cancel_ids) {
      // Every consumer hears whether its queue is paused at every poll (a replacement consumer
      // too), and of the cancels of its own queue's messages.
      for (auto* c : self->state.consumers()) {
        auto consumer = caf::actor_cast<consumer_actor>(c->handle);
        bool is_paused = std::find(paused.begin(), paused.end(), c->queue) != paused.end();
        self->send(consumer, pause_atom_v, is_paused);
        std::vector<std::string> ids;
        for (std::size_t i = 0; i < cancel_ids.size() && i < cancel_queues.size(); ++i)
          if (cancel_queues[i] == c->queue)
            ids.push_back(cancel_ids[i]);
        if (!ids.empty())
          self->send(consumer, cancels_atom_v, std::move(ids));
      }
    },
    [=](wake_atom, const std::string& queue) {
      auto& s = self->state;
      if (s.stopping)
        return;
      for (auto* c : s.consumers())
        if (queue.empty() || c->queue == queue)
          self->send(caf::actor_cast<consumer_actor>(c->handle), wake_atom_v);
    },
    [=](limiter_atom) -> caf::result<limiter_actor> {
      auto& s = self->state;
      if (!s.node.limiter)
        return make_caf_error(s.stopping ? errc::shutting_down : errc::not_found,
                              "the node's limiter actor is not running (the node registers "
                              "first: ask after ready)");
      return s.node.limiter;
    },
    [=](ready_atom) -> caf::typed_response_promise<node_report> {
      auto& s = self->state;
      auto rp = self->make_response_promise<node_report>();
      if (s.stopping)
        rp.deliver(make_caf_error(errc::shutting_down, "the node is stopping"));
      else if (s.ready)
        rp.deliver(s.base_report());
      else
        s.ready_waiters.push_back(rp);
      return rp;
    },
    [=](status_atom) -> caf::typed_response_promise<node_report> {
      // Sums the consumers' counters; a consumer that does not answer in time is left out.
      auto& s = self->state;
      auto rp = self->make_response_promise<node_report>();
      auto consumers = s.consumers();
      if (s.stopping || consumers.empty()) {
        rp.deliver(s.stopping ? s.final_report : s.base_report());
        return rp;
      }
      auto total = std::make_shared<node_report>(s.base_report());
      auto pending = std::make_shared<std::size_t>(consumers.size());
      for (auto* c : consumers) {
        auto settle = [=]() mutable {
          if (--*pending == 0)
            rp.deliver(*total);
        };
        self->request(caf::actor_cast<consumer_actor>(c->handle), seconds(5), status_atom_v)
          .then(
            [=](const consumer_report& r) mutable {
              total->executed += r.executed;
              total->released += r.released;
              total->abandoned += r.stuck;
              settle();
            },
            [=](caf::error&) mutable { settle(); });
      }
      return rp;
    },
    [=](deadline_atom) {
      if (self->state.stopping) {
        log().warn("the listener did not confirm deregistration in time");
        deliver_stop(self);
      }
    },
    [=](stop_atom) -> caf::typed_response_promise<node_report> {
      auto rp = self->make_response_promise<node_report>();
      auto& s = self->state;
      if (s.stopping) {
        rp.deliver(make_caf_error(errc::shutting_down, "the node is already stopping"));
        return rp;
      }
      s.stop_promise = rp;
      if (s.node.node_id == 0) {
        // Not registered yet: nothing was claimed.
        s.stopping = true;
        finish_stop(self);
        return rp;
      }
      begin_stop(self);
      return rp;
    },
  };
}

} // namespace

node_supervisor_actor spawn_node_supervisor(caf::actor_system& sys, node_options options,
                                            std::shared_ptr<const task_registry> tasks) {
  validate(options);
  auto endpoint = start_metrics_endpoint(options, tasks.get(), node_name_of(options));
  return sys.spawn(supervisor_impl, std::move(options), std::move(tasks), std::move(endpoint));
}

} // namespace troupe::actors
