// The result waiter: answers result requests from actors without blocking them.
#include "actors/protocol.hpp"
#include "runtime/src/results.hpp"
#include "storage/connection.hpp"
#include "storage/migrations.hpp"
#include "storage/queries.hpp"
#include "troupe/client.hpp"
#include "troupe/dsn.hpp"
#include "troupe/log.hpp"

#include <map>
#include <optional>

namespace troupe::actors {

namespace {

using namespace std::chrono;

struct waiter {
  caf::typed_response_promise<std::string> promise;
  steady_clock::time_point deadline;
};

struct waiter_state {
  static inline const char* name = "troupe.result_waiter";
  std::string dsn;
  storage::statement_set_ptr stmts;
  std::optional<storage::connection> conn;
  std::multimap<std::string, waiter> pending; // message id -> waiters
  bool ticking = false;
  steady_clock::time_point last_check{};
};

using waiter_ptr = result_waiter_impl_actor::stateful_pointer<waiter_state>;

caf::error to_caf(const result_error& e) {
  auto text =
    e.failure_type().empty() ? std::string(e.what()) : e.failure_type() + ": " + e.failure_text();
  return make_caf_error(e.code(), text);
}

storage::connection& connection(waiter_ptr self) {
  auto& st = self->state;
  if (!st.conn || !st.conn->ok()) {
    st.conn.reset();
    st.conn.emplace(storage::connection::open(st.dsn, "troupe-result-waiter"));
    storage::follow_area_version(*st.conn, *st.stmts); // reads follow the area's version
    storage::listen_for_results(*st.conn, *st.stmts);
  }
  return *st.conn;
}

void expire(waiter_ptr self);

// Answers every waiter whose message has finished, and every waiter whose time is up.
void check(waiter_ptr self) {
  auto& st = self->state;
  st.last_check = steady_clock::now();
  std::vector<std::string> ids;
  for (auto i = st.pending.begin(); i != st.pending.end(); i = st.pending.upper_bound(i->first))
    ids.push_back(i->first);
  try {
    for (const auto& m : storage::read_results(connection(self), *st.stmts, ids)) {
      auto [from, to] = st.pending.equal_range(m.id);
      for (auto i = from; i != to; ++i) {
        try {
          i->second.promise.deliver(detail::result_of(m));
        } catch (const result_error& e) {
          i->second.promise.deliver(to_caf(e));
        }
      }
      st.pending.erase(from, to);
    }
  } catch (const error& e) {
    st.conn.reset(); // reconnect on the next check; waiters keep waiting until their deadline
    log().warn("result waiter: {}", e.what());
  }
  expire(self);
}

// Answers every waiter whose time is up.
void expire(waiter_ptr self) {
  auto& st = self->state;
  auto now = steady_clock::now();
  for (auto i = st.pending.begin(); i != st.pending.end();) {
    if (i->second.deadline <= now) {
      i->second.promise.deliver(
        make_caf_error(errc::timeout, "no result for message " + i->first + " in time"));
      i = st.pending.erase(i);
    } else {
      ++i;
    }
  }
}

void tick(waiter_ptr self) {
  auto& st = self->state;
  if (st.ticking || st.pending.empty())
    return;
  st.ticking = true;
  self->delayed_send(self, milliseconds(20), poll_atom_v);
}

result_waiter_impl_actor::behavior_type waiter_impl(waiter_ptr self, std::string dsn,
                                                    storage::statement_set_ptr stmts) {
  self->state.dsn = std::move(dsn);
  self->state.stmts = std::move(stmts);
  self->set_default_handler(
    [](caf::scheduled_actor*, caf::message_view& x) -> caf::result<caf::message> {
      log().warn("result waiter: unexpected message {}", caf::to_string(x.content()));
      return caf::sec::unexpected_message;
    });
  return {
    [=](caf::get_atom, std::string& id,
        std::int64_t timeout_ms) -> caf::typed_response_promise<std::string> {
      auto& st = self->state;
      auto rp = self->make_response_promise<std::string>();
      std::string canonical;
      if (!parse_uuid(id, canonical)) {
        rp.deliver(
          make_caf_error(errc::invalid_argument, "message id \"" + id + "\" is not a UUID"));
        return rp;
      }
      st.pending.emplace(canonical, waiter{rp, steady_clock::now() + milliseconds(timeout_ms)});
      check(self);
      tick(self);
      return rp;
    },
    [=](poll_atom) {
      auto& st = self->state;
      st.ticking = false;
      bool woken = false;
      if (st.conn && st.conn->ok()) {
        // This actor is detached: a short wait on the socket blocks nobody else.
        try {
          woken = !st.conn->wait_for_notifications(milliseconds(30)).empty();
        } catch (const error& e) {
          st.conn.reset(); // reconnected by the next check
          log().warn("result waiter: {}", e.what());
        }
      }
      if (woken || steady_clock::now() - st.last_check >= milliseconds(500))
        check(self);
      else
        expire(self);
      tick(self);
    },
  };
}

} // namespace

} // namespace troupe::actors

namespace troupe {

result_waiter_actor spawn_result_waiter(caf::actor_system& sys, const std::string& dsn,
                                        const area& where) {
  validate_dsn(dsn);
  return sys.spawn<caf::detached>(actors::waiter_impl, dsn, storage::make_statement_set(where));
}

} // namespace troupe
