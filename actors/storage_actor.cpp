#include "actors/storage_actor.hpp"

#include "runtime/src/publish_plan.hpp"
#include "storage/connection.hpp"
#include "storage/counts.hpp"
#include "storage/operations.hpp"
#include "storage/queries.hpp"
#include "troupe/dsn.hpp"
#include "troupe/log.hpp"

#include <optional>

namespace troupe::actors {

namespace {

// What a pool's before_enqueue hook threw, whatever it was: the request is refused by its text.
class hook_refused : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

// A pool's middleware, its before_enqueue hook's exceptions turned into hook_refused, so that
// the storage actor tells a refusal from a failure of its own.
class refusing_hooks final : public middleware {
public:
  explicit refusing_hooks(middleware_ptr inner) : inner_(std::move(inner)) {}
  std::string name() const override { return inner_->name(); }
  void before_enqueue(message& m) override {
    try {
      inner_->before_enqueue(m);
    } catch (const std::exception& e) {
      throw hook_refused(e.what());
    } catch (...) {
      throw hook_refused("a non-standard exception");
    }
  }
  void after_enqueue(const message& m) override { inner_->after_enqueue(m); }

private:
  middleware_ptr inner_;
};

caf::error refusal(const hook_refused& e) {
  return make_caf_error(errc::invalid_argument,
                        std::string("a before_enqueue hook refused the batch: ") + e.what());
}

struct storage_state {
  static inline const char* name = "troupe.storage";
  storage_settings settings;
  std::optional<storage::connection> conn;
  std::chrono::steady_clock::time_point next_attempt{};
  std::chrono::milliseconds backoff{0};

  storage::connection& connection() {
    if (conn && conn->ok())
      return *conn;
    conn.reset();
    auto now = std::chrono::steady_clock::now();
    if (now < next_attempt)
      throw error(
        errc::connection_lost,
        "database unavailable; next connection attempt in " +
          std::to_string(
            std::chrono::duration_cast<std::chrono::milliseconds>(next_attempt - now).count()) +
          "ms");
    try {
      conn.emplace(storage::connection::open(settings.dsn, settings.application_name,
                                             settings.statement_timeout));
      if (backoff.count() > 0)
        log().info("storage connection restored");
      backoff = std::chrono::milliseconds{0};
      return *conn;
    } catch (const error&) {
      backoff = std::min(settings.reconnect_backoff_max,
                         backoff.count() == 0 ? std::chrono::milliseconds{100} : backoff * 2);
      next_attempt = std::chrono::steady_clock::now() + backoff;
      throw;
    }
  }

  // Runs one storage call and turns a Troupe error into a CAF error reply.
  template <class F>
  auto guarded(F&& f) -> caf::result<decltype(f(std::declval<storage::connection&>()))> {
    try {
      return f(connection());
    } catch (const error& e) {
      return failed(e);
    } catch (const std::exception& e) {
      log().error("storage request failed unexpectedly: {}", e.what());
      if (settings.metrics)
        settings.metrics->storage_error(errc::bug);
      return make_caf_error(errc::bug, e.what());
    }
  }

  // A failed request's reply; a lost connection is dropped so the next request reconnects.
  caf::error failed(const error& e) {
    if (e.code() == errc::connection_lost) {
      conn.reset();
      if (next_attempt < std::chrono::steady_clock::now())
        next_attempt = std::chrono::steady_clock::now();
    }
    log().warn("storage request failed: {}", e.what());
    if (settings.metrics)
      settings.metrics->storage_error(e.code());
    return make_caf_error(e.code(), e.what());
  }
};

storage_actor::behavior_type storage_impl(storage_actor::stateful_pointer<storage_state> self,
                                          storage_settings settings) {
  self->state.settings = std::move(settings);
  self->set_default_handler(
    [=](caf::scheduled_actor*, caf::message_view& x) -> caf::result<caf::message> {
      log().warn("storage actor: unexpected message {}", caf::to_string(x.content()));
      return caf::sec::unexpected_message;
    });
  auto& st = self->state;
  const auto& stmts = *st.settings.statements;
  return {
    [=, &st, &stmts](claim_atom, const std::string& queue, std::int32_t node, std::int32_t limit,
                     std::int32_t eta_below, std::int32_t starting,
                     std::uint64_t claim) -> caf::result<storage::claim_result> {
      // The locked messages go to the requester before the reply, from the same actor and into
      // the same (normal priority) queue of its mailbox, so they arrive first. A high-priority
      // request would have its reply overtake them.
      auto to = caf::actor_cast<consumer_actor>(self->current_sender());
      auto hand_out = [&](std::vector<storage::claimed_message> locked) {
        self->send(to, locked_atom_v, claim, std::move(locked));
      };
      return st.guarded([&](storage::connection& c) {
        return storage::claim_batch_early(c, stmts, queue, node, limit, eta_below, starting,
                                          hand_out);
      });
    },
    [=, &st, &stmts](next_eta_atom, const std::string& queue) -> caf::result<std::int64_t> {
      return st.guarded([&](storage::connection& c) { return storage::next_eta(c, stmts, queue); });
    },
    [=, &st, &stmts](complete_atom, std::int32_t node,
                     const std::vector<storage::outcome>& outcomes) -> caf::result<std::int64_t> {
      return st.guarded(
        [&](storage::connection& c) { return storage::complete_batch(c, stmts, node, outcomes); });
    },
    [=, &st,
     &stmts](release_atom, std::int32_t node,
             const std::vector<storage::claimed_message>& msgs) -> caf::result<std::int64_t> {
      return st.guarded(
        [&](storage::connection& c) { return storage::release_claimed(c, stmts, node, msgs); });
    },
    [=, &st, &stmts](recover_atom, std::int32_t node, const std::string& queue,
                     const std::vector<std::string>& held,
                     const std::vector<storage::claimed_message>& started)
      -> caf::result<storage::recovery_result> {
      return st.guarded([&](storage::connection& c) {
        return storage::recover_unheld(c, stmts, node, queue, held, started);
      });
    },
    [=, &st](enqueue_atom, std::vector<message>& batch,
             std::vector<enqueue_options>& options) -> caf::result<std::vector<message>> {
      // The plan validates before any database access: a refused batch gets the answer
      // client::enqueue_many gives, even while the database is down.
      std::optional<detail::publish_plan> plan;
      try {
        plan.emplace(st.settings.statements, std::move(batch), std::move(options),
                     st.settings.enqueue_hooks, true);
      } catch (const error& e) {
        return make_caf_error(e.code(), e.what());
      } catch (const hook_refused& e) {
        return refusal(e); // without keys the hooks run here
      }
      if (plan->empty())
        return std::vector<message>{};
      // With keys the hooks run once the keys are claimed; a refusal rolls them back.
      std::optional<caf::error> refused;
      auto out = st.guarded([&](storage::connection& c) {
        try {
          detail::run_on_own_connection(c, *plan);
        } catch (const hook_refused& e) {
          refused = refusal(e);
          return std::vector<message>{};
        }
        return plan->finish(false);
      });
      if (refused)
        return *refused;
      return out;
    },
    [=, &st, &stmts](reap_atom, std::int64_t grace_ms) -> caf::result<storage::reap_report> {
      return st.guarded([&](storage::connection& c) {
        return storage::reap_dead_nodes(c, stmts, std::chrono::milliseconds{grace_ms});
      });
    },
    [=, &st, &stmts](vacuum_atom, std::int64_t min_dead) -> caf::result<std::int64_t> {
      return st.guarded(
        [&](storage::connection& c) { return storage::vacuum_queue(c, stmts, min_dead); });
    },
    [=, &st, &stmts](stats_atom,
                     const std::string& queue) -> caf::result<std::vector<queue_stats>> {
      return st.guarded([&](storage::connection& c) {
        return storage::queue_statistics(c, stmts, queue.empty() ? nullptr : &queue);
      });
    },
    [=, &st,
     &stmts](mark_started_atom, std::int32_t node,
             const std::vector<storage::started_attempt>& started) -> caf::result<std::int64_t> {
      return st.guarded(
        [&](storage::connection& c) { return storage::mark_started(c, stmts, node, started); });
    },
    [=, &st, &stmts](confirm_start_atom, std::int32_t node,
                     const std::vector<storage::started_attempt>& started)
      -> caf::result<std::vector<std::string>> {
      return st.guarded(
        [&](storage::connection& c) { return storage::confirm_starts(c, stmts, node, started); });
    },
    [=, &st,
     &stmts](progress_atom, std::int32_t node,
             const std::vector<storage::progress_update>& updates) -> caf::result<std::int64_t> {
      return st.guarded(
        [&](storage::connection& c) { return storage::write_progress(c, stmts, node, updates); });
    },
    [=, &st, &stmts](purge_atom, std::int64_t done, std::int64_t failed,
                     std::int64_t cancelled) -> caf::result<std::int64_t> {
      return st.guarded([&](storage::connection& c) {
        return storage::purge_finished(c, stmts, storage::retention{done, failed, cancelled}, 1000);
      });
    },
    [=, &st, &stmts](tidy_atom, std::int32_t limit) -> caf::result<std::int64_t> {
      return st.guarded([&](storage::connection& c) {
        storage::fold_state_counts(c, stmts);
        return storage::expire_results(c, stmts, limit);
      });
    },
  };
}

struct router_state {
  static inline const char* name = "troupe.storage_router";
  storage_settings settings;
  std::vector<storage_actor> members;
  std::size_t next = 0;

  // Two lanes: the first half of the pool (at least one member) takes claims, the rest takes
  // writes (completions, enqueues, hand-backs, janitor passes). A completion commit waits for
  // its WAL flush; a claim commits without waiting, and it must not queue behind one, or every
  // message's start would wait for other messages' outcomes. A pool of one shares its member.
  std::size_t claim_lanes() const { return members.size() < 2 ? 1 : members.size() / 2; }

  storage_actor& pick() {
    auto lanes = claim_lanes();
    if (members.size() <= lanes)
      return members[0];
    next = (next + 1) % (members.size() - lanes);
    return members[lanes + next];
  }

  // A queue's claims and its clean-ups after a failed claim always go to the same storage
  // actor, so a clean-up can never run before a claim that was still waiting in a mailbox.
  storage_actor& pick_for(const std::string& queue) {
    return members[std::hash<std::string>{}(queue) % claim_lanes()];
  }
};

storage_actor::behavior_type router_impl(storage_actor::stateful_pointer<router_state> self,
                                         storage_settings settings, int size) {
  auto& st = self->state;
  st.settings = std::move(settings);
  for (int i = 0; i < size; ++i) {
    auto member = spawn_storage_actor(self->system(), st.settings);
    self->monitor(member);
    st.members.push_back(member);
  }
  // A storage actor only dies from a bug (errors become replies); replace it. Requests that
  // were queued in its mailbox fail with request_receiver_down and their callers retry.
  self->set_down_handler([=](caf::down_msg& dm) {
    auto& members = self->state.members;
    for (auto& m : members) {
      if (m.address() == dm.source) {
        log().error("storage actor died ({}); starting a new one", caf::to_string(dm.reason));
        m = spawn_storage_actor(self->system(), self->state.settings);
        self->monitor(m);
      }
    }
  });
  // Stopping the router stops its pool.
  self->set_exit_handler([=](caf::exit_msg& em) {
    for (auto& m : self->state.members)
      self->send_exit(m, em.reason ? em.reason : caf::exit_reason::user_shutdown);
    self->state.members.clear();
    self->quit(em.reason);
  });
  self->set_default_handler(caf::print_and_drop);
  return {
    [=](claim_atom a, std::string& q, std::int32_t n, std::int32_t l, std::int32_t e,
        std::int32_t starting, std::uint64_t claim) {
      auto& member = self->state.pick_for(q);
      return self->delegate(member, a, std::move(q), n, l, e, starting, claim);
    },
    [=](next_eta_atom a, std::string& q) {
      auto& member = self->state.pick_for(q);
      return self->delegate(member, a, std::move(q));
    },
    [=](complete_atom a, std::int32_t n, std::vector<storage::outcome>& o) {
      return self->delegate(self->state.pick(), a, n, std::move(o));
    },
    [=](release_atom a, std::int32_t n, std::vector<storage::claimed_message>& m) {
      return self->delegate(self->state.pick(), a, n, std::move(m));
    },
    [=](recover_atom a, std::int32_t n, std::string& q, std::vector<std::string>& held,
        std::vector<storage::claimed_message>& started) {
      auto& member = self->state.pick_for(q);
      return self->delegate(member, a, n, std::move(q), std::move(held), std::move(started));
    },
    [=](enqueue_atom a, std::vector<message>& b, std::vector<enqueue_options>& o) {
      return self->delegate(self->state.pick(), a, std::move(b), std::move(o));
    },
    [=](reap_atom a, std::int64_t grace) { return self->delegate(self->state.pick(), a, grace); },
    // The node's janitor vacuums on a storage actor of its own, never through the pool; the
    // router answers it only because every storage actor takes the whole protocol.
    [=](vacuum_atom a, std::int64_t min_dead) {
      return self->delegate(self->state.pick(), a, min_dead);
    },
    [=](stats_atom a, std::string& q) {
      return self->delegate(self->state.pick(), a, std::move(q));
    },
    [=](mark_started_atom a, std::int32_t n, std::vector<storage::started_attempt>& started) {
      return self->delegate(self->state.pick(), a, n, std::move(started));
    },
    [=](confirm_start_atom a, std::int32_t n, std::vector<storage::started_attempt>& started) {
      return self->delegate(self->state.pick(), a, n, std::move(started));
    },
    [=](progress_atom a, std::int32_t n, std::vector<storage::progress_update>& updates) {
      return self->delegate(self->state.pick(), a, n, std::move(updates));
    },
    [=](purge_atom a, std::int64_t d, std::int64_t f, std::int64_t c) {
      return self->delegate(self->state.pick(), a, d, f, c);
    },
    [=](tidy_atom a, std::int32_t limit) { return self->delegate(self->state.pick(), a, limit); },
  };
}

} // namespace

storage_actor spawn_storage_actor(caf::actor_system& sys, storage_settings settings) {
  return sys.spawn<caf::detached>(storage_impl, std::move(settings));
}

storage_actor spawn_storage_router(caf::actor_system& sys, storage_settings settings, int size) {
  return sys.spawn(router_impl, std::move(settings), size);
}

} // namespace troupe::actors

namespace troupe {

storage_pool_actor spawn_storage_pool(caf::actor_system& sys, const std::string& dsn,
                                      const area& where, int connections,
                                      std::vector<middleware_ptr> middleware) {
  validate_dsn(dsn);
  actors::storage_settings s{dsn, storage::make_statement_set(where), "troupe-producer",
                             defaults::reconnect_backoff_max};
  for (auto& m : middleware)
    if (m)
      s.enqueue_hooks.push_back(std::make_shared<actors::refusing_hooks>(std::move(m)));
  return actors::spawn_storage_router(sys, std::move(s), connections);
}

} // namespace troupe
