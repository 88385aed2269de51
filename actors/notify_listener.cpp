#include "actors/notify_listener.hpp"

#include "storage/connection.hpp"
#include "storage/naming.hpp"
#include "storage/queries.hpp"
#include "troupe/log.hpp"

#include <optional>

namespace troupe::actors {

bool parse_wake_payload(std::string_view payload, std::string& queue) {
  if (!is_valid_queue_name(payload))
    return false;
  queue.assign(payload);
  return true;
}

namespace {

using namespace std::chrono;

// How long one poll of the socket may block before the mailbox is looked at again: the upper
// bound on how late a shutdown is noticed. Notifications wake the poll at once.
constexpr milliseconds mailbox_check{50};

void run_listener(caf::blocking_actor* self, listener_settings s) {
  const auto& stmts = *s.statements;
  std::optional<storage::connection> conn;
  std::int32_t node_id = s.node_id;
  milliseconds backoff{0};
  bool running = true;
  bool graceful = false;

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
        conn.emplace(storage::connection::open(s.dsn, "troupe-listener"));
        storage::prepare_listener_session(*conn, stmts);
        storage::listen_for_wakes(*conn, stmts);
        if (node_id == 0) {
          node_id = storage::register_node(*conn, stmts, s.identity);
          log().info("node registered node={} name={} channel={}", node_id, s.identity.name,
                     storage::wake_channel(stmts.where()));
          self->send(s.node, registered_atom_v, node_id);
        } else {
          storage::reregister_node(*conn, stmts, s.identity, node_id);
          log().info("listener reconnected node={}; rescanning every queue", node_id);
          self->send(s.node, wake_atom_v, std::string{});
        }
        backoff = milliseconds{0};
      } catch (const error& e) {
        conn.reset();
        backoff =
          std::min(s.reconnect_backoff_max, backoff.count() == 0 ? milliseconds{100} : backoff * 2);
        log().warn("listener cannot reach the database ({}); retrying in {}ms", e.what(),
                   backoff.count());
        drain_mailbox(backoff);
        continue;
      }
    }
    try {
      for (auto& n : conn->wait_for_notifications(mailbox_check)) {
        std::string queue;
        if (parse_wake_payload(n.payload, queue))
          self->send(s.node, wake_atom_v, std::move(queue));
        else
          log().debug("ignored a malformed notification on {}: \"{}\"", n.channel, n.payload);
      }
    } catch (const error& e) {
      log().warn("listener connection lost node={}: {}", node_id, e.what());
      conn.reset();
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
