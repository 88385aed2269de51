#include "actors/node_supervisor.hpp"

#include "actors/completion_batcher.hpp"
#include "actors/consumer.hpp"
#include "actors/janitor.hpp"
#include "actors/notify_listener.hpp"
#include "actors/storage_actor.hpp"
#include "troupe/log.hpp"

#include <unistd.h>

#include <algorithm>
#include <deque>
#include <map>
#include <optional>

namespace troupe::actors {

namespace {

using namespace std::chrono;

struct supervisor_state {
  static inline const char* name = "troupe.node_supervisor";
  node_options options;
  std::shared_ptr<const task_registry> tasks;
  storage::statement_set_ptr statements;
  storage::node_identity identity;
  std::int32_t node_id = 0;

  storage_actor storage;
  caf::actor listener;
  batcher_actor batcher;
  janitor_actor janitor;
  std::map<std::string, consumer_actor> consumers;
  std::map<caf::actor_addr, std::deque<steady_clock::time_point>> restarts;

  bool stopping = false;
  bool awaiting_listener = false; // the stop waits for the listener to deregister
  bool delivered = false;         // the stop's reply went out
  std::optional<caf::typed_response_promise<node_report>> stop_promise;
  std::size_t consumers_pending = 0;
  node_report final_report;

  const queue_options& queue(const std::string& name) const {
    for (const auto& q : options.queues)
      if (q.name == name)
        return q;
    throw error(errc::bug, "no queue " + name);
  }
};

using supervisor_ptr = node_actor::stateful_pointer<supervisor_state>;

storage_settings storage_config(const supervisor_state& st) {
  return storage_settings{st.options.dsn, st.statements, "troupe-node",
                          defaults::reconnect_backoff_max};
}

void spawn_listener(supervisor_ptr self) {
  auto& st = self->state;
  listener_settings ls{st.options.dsn, st.statements,
                       st.identity,    caf::actor_cast<node_actor>(self),
                       st.node_id,     defaults::listener_reconnect_backoff_max};
  st.listener = spawn_notify_listener(self->system(), std::move(ls));
  self->monitor(st.listener);
}

consumer_actor spawn_queue_consumer(supervisor_ptr self, const queue_options& q,
                                    bool replacing = false) {
  auto& st = self->state;
  consumer_settings cs{
    q, st.node_id, st.tasks, st.storage, st.batcher, st.options.time_limit_grace, replacing};
  auto c = spawn_consumer(self->system(), std::move(cs));
  self->monitor(c);
  return c;
}

// node_start hooks in stack order, node_stop hooks in reverse; a failing hook is logged.
void run_node_hooks(supervisor_ptr self, bool starting) {
  auto& st = self->state;
  node_info info{st.node_id, st.identity.name};
  const auto& stack = st.tasks->middleware();
  auto run = [&](const middleware_ptr& m) {
    try {
      if (starting)
        m->node_start(info);
      else
        m->node_stop(info);
    } catch (const std::exception& e) {
      log().error("middleware {} failed in {} node={}: {}", m->name(),
                  starting ? "node_start" : "node_stop", st.node_id, e.what());
    } catch (...) {
      log().error("middleware {} failed in {} node={}", m->name(),
                  starting ? "node_start" : "node_stop", st.node_id);
    }
  };
  if (starting)
    std::for_each(stack.begin(), stack.end(), run);
  else
    std::for_each(stack.rbegin(), stack.rend(), run);
}

void start_workers(supervisor_ptr self) {
  auto& st = self->state;
  run_node_hooks(self, true); // before any consumer can start an attempt
  st.batcher = spawn_completion_batcher(
    self->system(), batcher_settings{st.node_id, st.storage, st.options.completion_flush_interval,
                                     st.options.completion_batch_size});
  self->monitor(st.batcher);
  for (const auto& q : st.options.queues)
    st.consumers.emplace(q.name, spawn_queue_consumer(self, q));
  janitor_settings js{st.storage, st.options.janitor_interval, st.options.dead_node_grace};
  if (st.options.vacuum_dead_rows > 0) {
    auto upkeep = storage_config(st);
    upkeep.application_name = "troupe-node-upkeep";
    js.upkeep = spawn_storage_actor(self->system(), std::move(upkeep));
    js.vacuum_dead_rows = st.options.vacuum_dead_rows;
  }
  st.janitor = spawn_janitor(self->system(), std::move(js));
  self->monitor(st.janitor);
  log().info("node started node={} name={} queues={}", st.node_id, st.identity.name,
             fmt::join(st.identity.queues, ","));
}

// Ends every child; the listener deregisters the node on the way out.
void shut_down_children(supervisor_ptr self, const caf::error& reason) {
  auto& st = self->state;
  for (auto& [name, c] : st.consumers)
    self->send_exit(c, reason);
  if (st.janitor)
    self->send_exit(st.janitor, reason);
  if (st.batcher)
    self->send_exit(st.batcher, reason);
  if (st.listener)
    self->send_exit(st.listener, reason);
  if (st.storage)
    self->send_exit(st.storage, reason);
}

void deliver_stop(supervisor_ptr self) {
  auto& s = self->state;
  if (s.delivered)
    return; // the listener's down message and the deadline can both arrive
  s.delivered = true;
  if (s.node_id != 0)
    run_node_hooks(self, false);
  s.final_report.node_id = s.node_id;
  log().info("node stopped node={} executed={} released={} abandoned={}", s.node_id,
             s.final_report.executed, s.final_report.released, s.final_report.abandoned);
  if (s.stop_promise) {
    s.stop_promise->deliver(s.final_report);
    s.stop_promise.reset();
  }
  self->quit();
}

void finish_stop(supervisor_ptr self) {
  auto& st = self->state;
  auto done = [=] {
    auto& s = self->state;
    shut_down_children(self, caf::exit_reason::user_shutdown);
    if (s.listener) {
      // Reply once the listener has deregistered the node (its down message), or after a
      // deadline if the database does not answer.
      s.awaiting_listener = true;
      self->delayed_send(self, seconds(10), poll_atom_v);
      return;
    }
    deliver_stop(self);
  };
  if (!st.batcher) {
    done();
    return;
  }
  self->request(st.batcher, seconds(30), flush_atom_v)
    .then([=](std::int64_t) { done(); },
          [=](caf::error& err) {
            log().error("final flush of completions failed node={}: {}", self->state.node_id,
                        describe(err));
            done();
          });
}

void consumer_stopped(supervisor_ptr self) {
  auto& st = self->state;
  if (--st.consumers_pending == 0)
    finish_stop(self);
}

void begin_stop(supervisor_ptr self) {
  auto& st = self->state;
  st.stopping = true;
  log().info("node stopping node={}: no new claims, {}ms for running tasks", st.node_id,
             st.options.shutdown_grace.count());
  if (st.consumers.empty()) {
    finish_stop(self);
    return;
  }
  st.consumers_pending = st.consumers.size();
  for (auto& [name, c] : st.consumers) {
    auto consumer = c;
    self->request(consumer, st.options.shutdown_grace, stop_atom_v)
      .then(
        [=](const consumer_report& r) {
          auto& s = self->state;
          s.final_report.executed += r.executed;
          s.final_report.released += r.released;
          s.final_report.abandoned += r.stuck;
          consumer_stopped(self);
        },
        [=](caf::error&) {
          // The grace period ran out: count what is still running, and go on without it.
          self->request(consumer, seconds(5), status_atom_v)
            .then(
              [=](const consumer_report& r) {
                auto& s = self->state;
                log().warn("{} task(s) of queue {} still running after the shutdown grace; "
                           "abandoning them",
                           r.running, r.queue);
                s.final_report.executed += r.executed;
                s.final_report.released += r.released;
                s.final_report.abandoned += r.running + r.stuck;
                consumer_stopped(self);
              },
              [=](caf::error&) { consumer_stopped(self); });
        });
  }
}

bool allow_restart(supervisor_ptr self, const caf::actor_addr& who) {
  auto& times = self->state.restarts[who];
  auto now = steady_clock::now();
  while (!times.empty() && now - times.front() > restart_window)
    times.pop_front();
  times.push_back(now);
  return static_cast<int>(times.size()) <= max_restarts;
}

void escalate(supervisor_ptr self, const std::string& what, const caf::error& reason) {
  log().critical("{} died ({}); the node stops so that live nodes recover its messages", what,
                 caf::to_string(reason));
  shut_down_children(self, caf::exit_reason::user_shutdown);
  if (self->state.stop_promise)
    self->state.stop_promise->deliver(make_caf_error(errc::bug, what + " died"));
  self->quit(make_caf_error(errc::bug, what + " died: " + caf::to_string(reason)));
}

void on_child_down(supervisor_ptr self, caf::down_msg& dm) {
  auto& st = self->state;
  if (st.stopping) {
    if (st.listener && dm.source == st.listener.address()) {
      if (st.awaiting_listener)
        deliver_stop(self);
      else
        st.listener = nullptr; // gone early: the stop goes on without waiting for it
    }
    return;
  }
  if (dm.source == st.listener.address()) {
    if (!allow_restart(self, dm.source)) {
      escalate(self, "the notify listener (restarted too often)", dm.reason);
      return;
    }
    log().error("notify listener died ({}); restarting it", caf::to_string(dm.reason));
    auto old = dm.source;
    spawn_listener(self);
    st.restarts[st.listener.address()] = std::move(st.restarts[old]);
    st.restarts.erase(old);
    return;
  }
  for (auto& [name, c] : st.consumers) {
    if (dm.source != c.address())
      continue;
    if (!allow_restart(self, dm.source)) {
      escalate(self, "the consumer of queue " + name + " (restarted too often)", dm.reason);
      return;
    }
    log().error("consumer died queue={} reason={}; restarting it", name, caf::to_string(dm.reason));
    auto old = dm.source;
    // The replacement hands back what the dead one held before it claims anything.
    c = spawn_queue_consumer(self, st.queue(name), true);
    st.restarts[c.address()] = std::move(st.restarts[old]);
    st.restarts.erase(old);
    return;
  }
  if (dm.source == st.batcher.address())
    escalate(self, "the completion batcher", dm.reason);
  else if (dm.source == st.janitor.address())
    escalate(self, "the janitor", dm.reason);
  else if (dm.source == st.storage.address())
    escalate(self, "the storage router", dm.reason);
}

node_actor::behavior_type supervisor_impl(supervisor_ptr self, node_options options,
                                          std::shared_ptr<const task_registry> tasks) {
  auto& st = self->state;
  st.options = std::move(options);
  st.tasks = std::move(tasks);
  st.statements = storage::make_statement_set(st.options.area);
  char host[256] = {};
  ::gethostname(host, sizeof(host) - 1);
  st.identity.host = host;
  st.identity.pid = static_cast<std::int32_t>(::getpid());
  st.identity.name = st.options.name.empty()
                       ? st.identity.host + ":" + std::to_string(st.identity.pid)
                       : st.options.name;
  for (const auto& q : st.options.queues)
    st.identity.queues.push_back(q.name);
  st.storage =
    spawn_storage_router(self->system(), storage_config(st), st.options.storage_connections);
  self->monitor(st.storage);
  spawn_listener(self);
  self->set_down_handler([=](caf::down_msg& dm) { on_child_down(self, dm); });
  self->set_exit_handler([=](caf::exit_msg& em) {
    shut_down_children(self, em.reason);
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
      if (s.node_id != 0)
        return;
      s.node_id = id;
      s.final_report.node_id = id;
      if (s.stopping)
        finish_stop(self);
      else
        start_workers(self);
    },
    [=](caf::get_atom, const std::string& queue) -> caf::result<consumer_actor> {
      auto i = self->state.consumers.find(queue);
      if (i == self->state.consumers.end())
        return make_caf_error(errc::not_found, "this node does not consume queue " + queue);
      return i->second;
    },
    [=](wake_atom, const std::string& queue) {
      auto& s = self->state;
      if (s.stopping)
        return;
      if (queue.empty()) {
        for (auto& [name, c] : s.consumers)
          self->send(c, wake_atom_v);
        return;
      }
      auto i = s.consumers.find(queue);
      if (i != s.consumers.end())
        self->send(i->second, wake_atom_v);
    },
    [=](status_atom) -> caf::typed_response_promise<node_report> {
      // Sums the consumers' counters; a consumer that does not answer in time is left out.
      auto& s = self->state;
      auto rp = self->make_response_promise<node_report>();
      auto total = std::make_shared<node_report>();
      total->node_id = s.node_id;
      if (s.stopping || s.consumers.empty()) {
        rp.deliver(s.stopping ? s.final_report : *total);
        return rp;
      }
      auto pending = std::make_shared<std::size_t>(s.consumers.size());
      for (auto& [name, c] : s.consumers) {
        auto settle = [=]() mutable {
          if (--*pending == 0)
            rp.deliver(*total);
        };
        self->request(c, seconds(5), status_atom_v)
          .then(
            [=](const consumer_report& r) mutable {
              total->executed += r.executed;
              total->released += r.released;
              settle();
            },
            [=](caf::error&) mutable { settle(); });
      }
      return rp;
    },
    [=](poll_atom) {
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
      if (s.node_id == 0) {
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

node_actor spawn_node_supervisor(caf::actor_system& sys, node_options options,
                                 std::shared_ptr<const task_registry> tasks) {
  validate(options);
  return sys.spawn(supervisor_impl, std::move(options), std::move(tasks));
}

} // namespace troupe::actors

namespace troupe {

node_actor spawn_worker_node(caf::actor_system& sys, node_options options,
                             std::shared_ptr<const task_registry> tasks) {
  return actors::spawn_node_supervisor(sys, std::move(options), std::move(tasks));
}

storage_actor spawn_storage_pool(caf::actor_system& sys, const std::string& dsn, const area& where,
                                 int connections) {
  actors::storage_settings s{dsn, storage::make_statement_set(where), "troupe-producer",
                             defaults::reconnect_backoff_max};
  return actors::spawn_storage_router(sys, std::move(s), connections);
}

} // namespace troupe
