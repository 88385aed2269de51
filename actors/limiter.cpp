// The limiter actor: guards' acquisitions and releases, barrier creations and arrivals, on a
// connection of its own; barrier waiters are answered when the release's notification comes,
// or by a read twice a second in case one was missed.
#include "actors/limiter.hpp"

#include "runtime/src/limiter_key.hpp"
#include "storage/connection.hpp"
#include "storage/coordination.hpp"
#include "storage/migrations.hpp"
#include "troupe/dsn.hpp"
#include "troupe/log.hpp"

#include <map>
#include <optional>

namespace troupe::actors {

namespace {

using namespace std::chrono;

using limiter_impl_actor = limiter_actor::extend<caf::reacts_to<poll_atom>>;

struct barrier_waiter {
  caf::typed_response_promise<bool> promise;
  steady_clock::time_point deadline;
};

struct limiter_state {
  static inline const char* name = "troupe.limiter";
  limiter_settings settings;
  std::optional<storage::connection> conn;
  std::multimap<std::string, barrier_waiter> waiting; // barrier key -> waiters
  bool ticking = false;
  steady_clock::time_point last_check{};
};

using limiter_ptr = limiter_impl_actor::stateful_pointer<limiter_state>;

using detail::key_of;

storage::connection& connection(limiter_ptr self) {
  auto& st = self->state;
  if (!st.conn || !st.conn->ok()) {
    st.conn.reset();
    st.conn.emplace(storage::connection::open(st.settings.dsn, "troupe-limiter"));
    storage::follow_area_version(*st.conn, *st.settings.statements);
    if (st.settings.statements->version() < storage::coordination_version)
      throw storage::coordination_missing(st.settings.statements->version());
    storage::listen_for_barriers(*st.conn, *st.settings.statements);
  }
  return *st.conn;
}

// Runs `f` on the connection, once more on a new one when the connection was lost and `again`
// allows it; every failure becomes the reply's error.
template <class T, class F>
caf::result<T> run(limiter_ptr self, bool again, F f) {
  for (int round = 0;; ++round) {
    try {
      return f(connection(self));
    } catch (const error& e) {
      if (e.code() == errc::connection_lost)
        self->state.conn.reset();
      if (e.code() != errc::connection_lost || !again || round > 0)
        return make_caf_error(e.code(), e.what());
    } catch (const std::exception& e) {
      return make_caf_error(errc::bug, e.what());
    }
  }
}

void check(limiter_ptr self);
void expire(limiter_ptr self);

void tick(limiter_ptr self) {
  auto& st = self->state;
  if (st.ticking || st.waiting.empty())
    return;
  st.ticking = true;
  self->delayed_send(self, milliseconds(20), poll_atom_v);
}

// Answers the waiters of every released barrier, and those whose time is up.
void check(limiter_ptr self) {
  auto& st = self->state;
  st.last_check = steady_clock::now();
  try {
    for (auto i = st.waiting.begin(); i != st.waiting.end();) {
      auto key = i->first;
      auto released = storage::barrier_released(connection(self), *st.settings.statements, key);
      auto [from, to] = st.waiting.equal_range(key);
      if (!released || *released) {
        for (auto w = from; w != to; ++w) {
          if (released)
            w->second.promise.deliver(true);
          else
            w->second.promise.deliver(make_caf_error(
              errc::not_found, "no barrier \"" + key + "\" (expired while waiting)"));
        }
        i = st.waiting.erase(from, to);
      } else {
        i = to;
      }
    }
  } catch (const std::exception& e) {
    st.conn.reset(); // reconnected at the next check; the waiters wait until their deadline
    log().warn("limiter: {}", e.what());
  }
  expire(self);
}

// Answers the waiters whose time is up: their barrier was not released in time.
void expire(limiter_ptr self) {
  auto& st = self->state;
  auto now = steady_clock::now();
  for (auto i = st.waiting.begin(); i != st.waiting.end();) {
    if (i->second.deadline <= now) {
      i->second.promise.deliver(false);
      i = st.waiting.erase(i);
    } else {
      ++i;
    }
  }
}

limiter_impl_actor::behavior_type limiter_impl(limiter_ptr self, limiter_settings settings) {
  self->state.settings = std::move(settings);
  self->set_default_handler(
    [](caf::scheduled_actor*, caf::message_view& x) -> caf::result<caf::message> {
      log().warn("limiter: unexpected message {}", caf::to_string(x.content()));
      return caf::sec::unexpected_message;
    });
  return {
    [=](acquire_atom, limit& l, std::string& holder, std::int64_t ttl_ms) -> caf::result<bool> {
      try {
        validate_limit(l);
      } catch (const error& e) {
        return make_caf_error(e.code(), e.what());
      }
      if (ttl_ms <= 0)
        return make_caf_error(errc::invalid_argument,
                              "limiter \"" + l.key + "\": a TTL of 0 ms or less");
      // Again after a lost connection with the same holder: a slot already taken is kept.
      return run<bool>(self, true, [&](storage::connection& c) {
        return storage::limit_acquire(c, *self->state.settings.statements, key_of(l), holder,
                                      self->state.settings.node_id, ttl_ms);
      });
    },
    [=](give_back_atom, limit& l, std::string& holder) -> caf::result<bool> {
      return run<bool>(self, true, [&](storage::connection& c) {
        return storage::limit_release(c, *self->state.settings.statements, key_of(l), holder);
      });
    },
    [=](barrier_atom, std::string& key, std::int32_t parties,
        std::int64_t ttl_ms) -> caf::result<bool> {
      if (key.empty() || key.size() > max_limit_key || parties < 1 || ttl_ms <= 0)
        return make_caf_error(errc::invalid_argument,
                              "barrier \"" + key +
                                "\": needs a key of 1 to 200 bytes, 1 party or more and a TTL "
                                "above 0 ms");
      return run<bool>(self, true, [&](storage::connection& c) {
        return storage::barrier_create(c, *self->state.settings.statements, key, parties, ttl_ms);
      });
    },
    [=](arrive_atom, std::string& key, std::int64_t timeout_ms) -> caf::result<bool> {
      // Never run twice: an arrival lost with its connection may have counted.
      bool released = false;
      try {
        released = storage::barrier_arrive(connection(self), *self->state.settings.statements, key);
      } catch (const error& e) {
        if (e.code() == errc::connection_lost)
          self->state.conn.reset();
        return make_caf_error(e.code(), e.what());
      } catch (const std::exception& e) {
        return make_caf_error(errc::bug, e.what());
      }
      if (released || timeout_ms <= 0)
        return released;
      auto rp = self->make_response_promise<bool>();
      self->state.waiting.emplace(
        key, barrier_waiter{rp, steady_clock::now() + milliseconds(timeout_ms)});
      tick(self);
      return rp;
    },
    [=](poll_atom) {
      auto& st = self->state;
      st.ticking = false;
      bool woken = false;
      if (st.conn && st.conn->ok()) {
        // Detached: a short wait on the socket blocks nobody else.
        try {
          woken = !st.conn->wait_for_notifications(milliseconds(30)).empty();
        } catch (const std::exception& e) {
          st.conn.reset();
          log().warn("limiter: {}", e.what());
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

troupe::error from_caf(const caf::error& err) {
  if (err.category() == caf::atom("troupe")) {
    std::string text;
    if (err.context().match_elements<std::string>())
      text = err.context().get_as<std::string>(0);
    return error(static_cast<errc>(err.code()), text);
  }
  return error(errc::connection_lost, "the node's limiter actor: " + caf::to_string(err));
}

} // namespace

limiter_actor spawn_limiter_actor(caf::actor_system& sys, limiter_settings settings) {
  return sys.spawn<caf::detached>(limiter_impl, std::move(settings));
}

void limiter_port::set(limiter_actor a) {
  std::lock_guard lock{mutex_};
  actor_ = caf::actor_cast<caf::weak_actor_ptr>(a);
}

limiter_actor limiter_port::current() {
  std::lock_guard lock{mutex_};
  auto strong = actor_.lock();
  if (!strong)
    throw error(errc::shutting_down, "the node's limiter actor is not running");
  return caf::actor_cast<limiter_actor>(strong);
}

// The actor is looked up first: only a live actor vouches for its actor system, which the
// request's scoped actor needs.
bool limiter_port::acquire(const limit& l, const std::string& holder,
                           std::chrono::milliseconds ttl) {
  auto target = current();
  caf::scoped_actor self{target->home_system()};
  bool got = false;
  std::optional<error> failed;
  self->request(target, minutes(1), acquire_atom_v, l, holder, ttl.count())
    .receive([&](bool ok) { got = ok; }, [&](caf::error& err) { failed = from_caf(err); });
  if (failed)
    throw *failed;
  return got;
}

void limiter_port::release(const limit& l, const std::string& holder) {
  auto target = current();
  caf::scoped_actor self{target->home_system()};
  std::optional<error> failed;
  self->request(target, minutes(1), give_back_atom_v, l, holder)
    .receive([&](bool) {}, [&](caf::error& err) { failed = from_caf(err); });
  if (failed)
    throw *failed;
}

} // namespace troupe::actors

namespace troupe {

limiter_actor spawn_limiter(caf::actor_system& sys, const std::string& dsn, const area& where) {
  validate_dsn(dsn);
  return actors::spawn_limiter_actor(sys, {dsn, storage::make_statement_set(where), 0});
}

} // namespace troupe
