#include "actors/notify_listener.hpp"

#include "storage/connection.hpp"
#include "storage/migrations.hpp"
#include "storage/naming.hpp"
#include "storage/operations.hpp"
#include "storage/queries.hpp"
#include "troupe/log.hpp"

#include <optional>

namespace troupe::actors {

namespace {

using namespace std::chrono;

// How long one poll of the socket may block before the mailbox is looked at again: the upper
// bound on how late a shutdown is noticed. Notifications wake the poll at once.
constexpr milliseconds mailbox_check{50};
// How often the listener checks that its session still holds the node's liveness lock, and
// polls what the node must honour (paused queues, cancel requests).
constexpr milliseconds lock_check{1000};

// How often a node on an area behind this Troupe looks whether the area was upgraded.
constexpr milliseconds version_check{60000};

// An area upgraded while the node runs: from now on its statements are those of the new
// version (pauses and cancels are honoured once the area has migration 5).
void refresh_version(storage::connection& conn, const storage::statement_set& stmts) {
  if (stmts.version() >= storage::latest_migration())
    return;
  auto v = std::min(storage::current_version(conn, stmts), storage::latest_migration());
  if (v > stmts.version()) {
    log().info("area (schema \"{}\", prefix \"{}\") is now at schema version {}: running its "
               "statements",
               stmts.where().schema, stmts.where().prefix, v);
    stmts.use_version(v);
  }
}

// The control poll (areas from migration 5 on): tells the node which of its queues are paused
// and which of its messages had their cancel requested. A failure other than a lost connection
// is logged and the next poll tries again; a lost connection is the caller's to handle.
void poll_control(caf::blocking_actor* self, const listener_settings& s, storage::connection& conn,
                  std::int32_t node_id) {
  const auto& stmts = *s.statements;
  if (stmts.version() < 5 || node_id == 0)
    return;
  try {
    auto state = storage::control_poll(conn, stmts, node_id, s.identity.queues);
    std::vector<std::string> queues;
    std::vector<std::string> ids;
    for (auto& [q, id] : state.cancels) {
      queues.push_back(std::move(q));
      ids.push_back(std::move(id));
    }
    self->send(s.node, control_atom_v, std::move(state.paused), std::move(queues), std::move(ids));
  } catch (const error& e) {
    if (e.code() == errc::connection_lost)
      throw;
    log().warn("control poll failed node={}: {}", node_id, e.what());
  }
}

void run_listener(caf::blocking_actor* self, listener_settings s) {
  const auto& stmts = *s.statements;
  std::optional<storage::connection> conn;
  std::int32_t node_id = s.node_id;
  milliseconds backoff{0};
  bool running = true;
  bool graceful = false;
  // Whether the node holds its liveness lock, as its consumers were last told. Without it, a
  // janitor may declare the node dead and hand its messages to other nodes: the consumers
  // claim nothing and start nothing until the lock is back.
  bool lock_held = true;
  auto next_lock_check = steady_clock::now() + lock_check;
  auto next_version_check = steady_clock::now() + version_check;
  auto lock_lost = [&](const std::string& why) {
    conn.reset();
    if (!lock_held || node_id == 0)
      return;
    lock_held = false;
    log().warn("node={} lost its liveness lock ({}): it claims nothing and starts nothing until "
               "it has the lock back",
               node_id, why);
    self->send(s.node, liveness_atom_v, false, false);
  };

  auto drain_mailbox = [&](milliseconds wait) {
    bool first = true;
    while (running && (first || self->has_next_message())) {
      first = false;
      self->receive(
        [&](caf::exit_msg& em) {
          running = false;
          graceful = em.reason == caf::exit_reason::user_shutdown;
          self->fail_state(em.reason);
        },
        caf::others >> [&](caf::message_view& x) -> caf::result<caf::message> {
          log().warn("listener: unexpected message {}", caf::to_string(x.content()));
          return caf::sec::unexpected_message;
        },
        caf::after(wait) >> [] {});
      wait = milliseconds{0};
    }
  };

  while (running) {
    if (!conn) {
      try {
        conn.emplace(storage::connection::open(s.dsn, "troupe-listener", s.statement_timeout));
        storage::prepare_listener_session(*conn, stmts);
        storage::listen_for_wakes(*conn, stmts);
        if (node_id == 0) {
          node_id = storage::register_node(*conn, stmts, s.identity);
          log().info("node registered node={} name={} channel={}", node_id, s.identity.name,
                     storage::wake_channel(stmts.where()));
          if (stmts.version() < 5)
            log().warn("area (schema \"{}\", prefix \"{}\") is at schema version {}: pausing "
                       "queues and cancelling messages need version 5 (run `troupe upgrade`); "
                       "this node runs without them",
                       stmts.where().schema, stmts.where().prefix, stmts.version());
          if (stmts.version() >= 5) {
            auto missing = storage::missing_indexes(*conn, stmts);
            if (!missing.empty())
              log().warn("the area lacks index(es) {}: statements that read through them read "
                         "far more rows (create them as docs/operations.md shows)",
                         fmt::join(missing, ", "));
          }
          self->send(s.node, registered_atom_v, node_id);
          poll_control(self, s, *conn, node_id);
        } else {
          refresh_version(*conn, stmts);
          bool reaped = storage::reregister_node(*conn, stmts, s.identity, node_id);
          if (reaped)
            log().warn("node={} was declared dead while it had no lock: registered again; its "
                       "messages went back to their queues, and the completions of the attempts "
                       "it still runs will be refused",
                       node_id);
          log().info("listener reconnected node={}; rescanning every queue", node_id);
          // Told every time, not only after a loss this listener saw: the node may have
          // marked the lock lost when an earlier listener died.
          lock_held = true;
          self->send(s.node, liveness_atom_v, true, reaped);
          poll_control(self, s, *conn, node_id); // a pause may have come while it was away
          self->send(s.node, wake_atom_v, std::string{});
        }
        backoff = milliseconds{0};
        next_lock_check = steady_clock::now() + lock_check;
      } catch (const error& e) {
        lock_lost(e.what());
        backoff =
          std::min(s.reconnect_backoff_max, backoff.count() == 0 ? milliseconds{100} : backoff * 2);
        log().warn("listener cannot reach the database ({}); retrying in {}ms", e.what(),
                   backoff.count());
        drain_mailbox(backoff);
        continue;
      }
    }
    try {
      bool control = false; // a pause, resume or cancel was announced: poll now
      for (auto& n : conn->wait_for_notifications(mailbox_check)) {
        std::string queue;
        if (parse_wake_payload(n.payload, queue))
          self->send(s.node, wake_atom_v, std::move(queue));
        else if (n.payload.starts_with("!"))
          control = true;
        else
          log().debug("ignored a malformed notification on {}: {}", n.channel, loggable(n.payload));
      }
      if (node_id != 0 && steady_clock::now() >= next_lock_check) {
        next_lock_check = steady_clock::now() + lock_check;
        if (!storage::holds_node_lock(*conn, stmts, node_id)) {
          // The session lives but lost the lock (pg_advisory_unlock_all, say): a new session
          // takes it again, as after a lost connection.
          lock_lost("its session no longer holds it");
          continue;
        }
        control = true;
        if (steady_clock::now() >= next_version_check) {
          next_version_check = steady_clock::now() + version_check;
          refresh_version(*conn, stmts);
        }
      }
      if (control)
        poll_control(self, s, *conn, node_id);
    } catch (const error& e) {
      log().warn("listener connection lost node={}: {}", node_id, e.what());
      lock_lost(e.what());
      continue;
    }
    drain_mailbox(milliseconds{0});
  }
  if (conn && conn->ok() && graceful && node_id != 0) {
    try {
      storage::deregister_node(*conn, stmts, node_id);
      log().info("node deregistered node={}", node_id);
    } catch (const error& e) {
      log().warn("could not deregister node={}: {}", node_id, e.what());
    }
  }
}

} // namespace

caf::actor spawn_notify_listener(caf::actor_system& sys, listener_settings settings) {
  return sys.spawn<caf::detached>(run_listener, std::move(settings));
}

} // namespace troupe::actors
