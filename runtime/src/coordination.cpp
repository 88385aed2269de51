// Guards and barriers: through a node's limiter actor (a task's context) or a client's
// connection. The decisions are the SQL functions of migration 7 (storage/coordination.hpp).
#include "troupe/coordination.hpp"

#include "composition_access.hpp"
#include "limiter_key.hpp"

#include "storage/coordination.hpp"
#include "troupe/client.hpp"
#include "troupe/error.hpp"
#include "troupe/log.hpp"
#include "troupe/message.hpp"
#include "troupe/task.hpp"

#include <fmt/format.h>

namespace troupe {

namespace {

using detail::key_of;
using storage::coordination_missing;

// Runs `f` on the client's connection once the area is known to have coordination.
template <class F>
void with_coordination(client& c, F f) {
  detail::client_access::with_connection(
    c, [&](storage::connection& conn, const storage::statement_set& stmts, bool first_try) {
      if (stmts.version() < storage::coordination_version)
        throw coordination_missing(stmts.version());
      f(conn, stmts, first_try);
    });
}

void check_ttl(std::string_view what, const std::string& key, std::chrono::milliseconds ttl) {
  if (ttl.count() <= 0 || ttl.count() > max_limit_window_ms)
    throw error(errc::invalid_argument,
                fmt::format("{} \"{}\": TTL {} ms is out of range (1 to {} ms)", what, key,
                            ttl.count(), max_limit_window_ms));
}

} // namespace

struct limit_guard::backend {
  limit l;
  std::string holder = new_message_id();
  bool held = true;

  explicit backend(limit x) : l(std::move(x)) {}
  virtual ~backend() = default;
  virtual void give_back() = 0;
};

namespace {

struct port_backend final : limit_guard::backend {
  coordination_port* port;
  port_backend(limit l, coordination_port* p) : backend(std::move(l)), port(p) {}
  void give_back() override { port->release(l, holder); }
};

struct client_backend final : limit_guard::backend {
  client* c;
  client_backend(limit l, client* x) : backend(std::move(l)), c(x) {}
  void give_back() override {
    with_coordination(*c, [&](storage::connection& conn, const storage::statement_set& stmts,
                              bool) { storage::limit_release(conn, stmts, key_of(l), holder); });
  }
};

coordination_port* port_of(const task_context& ctx) {
  if (!ctx.coordination)
    throw error(errc::invalid_argument,
                "a limit_guard on a task_context needs a worker node (this context has no "
                "limiter actor): outside a node, acquire through a client");
  return ctx.coordination;
}

} // namespace

const limit& declared_limit(const task_context& ctx, std::string_view key) {
  if (!ctx.coordination)
    throw error(errc::invalid_argument,
                fmt::format("limiter \"{}\": a declared limiter needs a worker node (this "
                            "context has none)",
                            key));
  const auto& declared = ctx.coordination->declared();
  for (const auto& l : declared)
    if (l.key == key)
      return l;
  std::vector<std::string_view> keys;
  for (const auto& l : declared)
    keys.push_back(l.key);
  throw error(
    errc::invalid_argument,
    fmt::format("limiter \"{}\" is not declared on this node ([limits] in "
                "troupe.ini declares {})",
                key,
                keys.empty() ? std::string("none") : fmt::format("{}", fmt::join(keys, ", "))));
}

namespace {

std::unique_ptr<limit_guard::backend> acquire_through_port(const task_context& ctx, limit l,
                                                           std::chrono::milliseconds ttl) {
  validate_limit(l);
  check_ttl("limiter", l.key, ttl);
  auto b = std::make_unique<port_backend>(std::move(l), port_of(ctx));
  if (!b->port->acquire(b->l, b->holder, ttl))
    return nullptr;
  return b;
}

std::unique_ptr<limit_guard::backend> acquire_through_client(client& c, limit l,
                                                             std::chrono::milliseconds ttl) {
  validate_limit(l);
  check_ttl("limiter", l.key, ttl);
  auto b = std::make_unique<client_backend>(std::move(l), &c);
  bool got = false;
  // Run again after a lost connection with the same holder: a concurrent slot already taken
  // is found and kept, not taken twice.
  with_coordination(c, [&](storage::connection& conn, const storage::statement_set& stmts, bool) {
    got = storage::limit_acquire(conn, stmts, key_of(b->l), b->holder, 0, ttl.count());
  });
  if (!got)
    return nullptr;
  return b;
}

std::unique_ptr<limit_guard::backend> or_refused(std::unique_ptr<limit_guard::backend> b,
                                                 const std::string& key) {
  if (!b)
    throw limit_refused(key);
  return b;
}

} // namespace

limit_guard::limit_guard(std::unique_ptr<backend> b) : b_(std::move(b)) {}

limit_guard::limit_guard(const task_context& ctx, limit l, std::chrono::milliseconds ttl)
    : b_(or_refused(acquire_through_port(ctx, l, ttl), l.key)) {}

limit_guard::limit_guard(const task_context& ctx, std::string_view key,
                         std::chrono::milliseconds ttl)
    : limit_guard(ctx, declared_limit(ctx, key), ttl) {}

limit_guard::limit_guard(client& c, limit l, std::chrono::milliseconds ttl)
    : b_(or_refused(acquire_through_client(c, l, ttl), l.key)) {}

std::optional<limit_guard> limit_guard::try_acquire(const task_context& ctx, limit l,
                                                    std::chrono::milliseconds ttl) {
  if (auto b = acquire_through_port(ctx, std::move(l), ttl))
    return limit_guard(std::move(b));
  return std::nullopt;
}

std::optional<limit_guard> limit_guard::try_acquire(const task_context& ctx, std::string_view key,
                                                    std::chrono::milliseconds ttl) {
  return try_acquire(ctx, declared_limit(ctx, key), ttl);
}

std::optional<limit_guard> limit_guard::try_acquire(client& c, limit l,
                                                    std::chrono::milliseconds ttl) {
  if (auto b = acquire_through_client(c, std::move(l), ttl))
    return limit_guard(std::move(b));
  return std::nullopt;
}

limit_guard::limit_guard(limit_guard&&) noexcept = default;

limit_guard& limit_guard::operator=(limit_guard&& other) noexcept {
  if (this != &other) {
    release();
    b_ = std::move(other.b_);
  }
  return *this;
}

limit_guard::~limit_guard() {
  release();
}

void limit_guard::release() noexcept {
  if (!b_ || !b_->held)
    return;
  b_->held = false;
  if (b_->l.kind != limit_kind::concurrent)
    return; // bucket and window acquisitions are spent, not given back
  try {
    b_->give_back();
  } catch (const std::exception& e) {
    log().warn("limiter \"{}\": could not give its slot back ({}); it is free at its TTL or "
               "with its node",
               b_->l.key, e.what());
  }
}

const limit& limit_guard::held() const noexcept {
  return b_->l;
}

std::int64_t limit_in_use(client& c, const limit& l) {
  validate_limit(l);
  std::int64_t n = 0;
  with_coordination(c, [&](storage::connection& conn, const storage::statement_set& stmts, bool) {
    n = storage::limit_in_use(conn, stmts, key_of(l));
  });
  return n;
}

barrier::barrier(client& c, std::string key, std::chrono::milliseconds ttl)
    : client_(&c), key_(std::move(key)), ttl_(ttl) {
  if (key_.empty())
    throw error(errc::invalid_argument, "barrier: the key is empty");
  if (key_.size() > max_limit_key)
    throw error(errc::invalid_argument,
                fmt::format("barrier \"{}...\": the key is longer than {} bytes",
                            key_.substr(0, 40), max_limit_key));
  check_ttl("barrier", key_, ttl_);
}

bool barrier::create(std::int32_t parties) {
  if (parties < 1 || parties > max_limit_capacity)
    throw error(errc::invalid_argument,
                fmt::format("barrier \"{}\": {} parties is out of range (1 to {})", key_, parties,
                            max_limit_capacity));
  bool created = false;
  with_coordination(*client_,
                    [&](storage::connection& conn, const storage::statement_set& stmts, bool) {
                      // A creation that committed before the connection was lost reads as "exists"
                      // (false) on its second run: which call created it cannot be told then.
                      created = storage::barrier_create(conn, stmts, key_, parties, ttl_.count());
                    });
  return created;
}

bool barrier::arrive() {
  bool released = false;
  with_coordination(*client_, [&](storage::connection& conn, const storage::statement_set& stmts,
                                  bool first_try) {
    // An arrival may have committed before the connection was lost: arriving again would
    // count this party twice.
    if (!first_try)
      throw error(errc::connection_lost, "barrier \"" + key_ +
                                           "\": the connection was lost during the arrival, which "
                                           "may have counted");
    released = storage::barrier_arrive(conn, stmts, key_);
  });
  return released;
}

bool barrier::released() {
  std::optional<bool> state;
  with_coordination(*client_, [&](storage::connection& conn, const storage::statement_set& stmts,
                                  bool) { state = storage::barrier_released(conn, stmts, key_); });
  if (!state)
    throw error(errc::not_found, "no barrier \"" + key_ + "\" (never created, or expired)");
  return *state;
}

bool barrier::wait(std::chrono::milliseconds timeout) {
  using clock = std::chrono::steady_clock;
  auto deadline = clock::now() + timeout;
  if (arrive())
    return true;
  // Waiting gets a connection of its own, LISTENing before it reads: a release after the read
  // wakes it, one before it is seen by the read.
  auto conn = detail::client_access::open_own(*client_);
  auto stmts = detail::client_access::statements(*client_);
  storage::listen_for_barriers(conn, *stmts);
  for (;;) {
    auto state = storage::barrier_released(conn, *stmts, key_);
    if (!state)
      throw error(errc::not_found, "no barrier \"" + key_ + "\" (expired while waiting)");
    if (*state)
      return true;
    auto now = clock::now();
    if (now >= deadline)
      return false;
    // Woken by the release's notification; a read twice a second covers a missed one.
    auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - now);
    conn.wait_for_notifications(std::min(left, std::chrono::milliseconds{500}));
  }
}

} // namespace troupe
