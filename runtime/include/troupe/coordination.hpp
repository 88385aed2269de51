// Coordination across nodes: rate limiters, per-key concurrency and barriers, kept in the
// area's coordination tables (migration 7). docs/coordination.md tells how each behaves.
//
//   inline const troupe::task_ref<void(std::string)> charge{
//     "charge", "payments", {troupe::concurrency("card-gateway", 5)}};      // claim-time limit
//   client.enqueue(charge("cus_42").with_concurrency_key("cus_42"));       // one per customer
//
//   troupe::limit_guard slot(ctx, troupe::bucket("mail", 100, std::chrono::seconds(1)));
//
//   troupe::barrier b(client, "import-" + id);
//   b.create(4);
//   b.wait(std::chrono::minutes(5));
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace troupe {

class client;
struct task_context;

/// The reference's three kinds of rate limiter.
enum class limit_kind : std::uint8_t {
  /// At most `capacity` holders at once (a mutex at 1). A slot is held until its holder lets
  /// go: a message until it leaves its running state, a guard until it is destroyed (or its
  /// TTL), and either until its node is declared dead.
  concurrent,
  /// At most `capacity` acquisitions per fixed window of `window` (windows aligned on the
  /// Unix epoch); nothing to give back.
  bucket,
  /// At most `capacity` acquisitions in any sliding `window`; nothing to give back.
  window,
};

/// "concurrent", "bucket" or "window".
std::string_view to_string(limit_kind kind) noexcept;
/// The kind called `name`. Throws troupe::error(invalid_argument) naming the limiter `key` and
/// the kinds there are when there is none of that name.
limit_kind parse_limit_kind(std::string_view name, std::string_view key);

/// One limiter: its key (shared by every node and guard of the area that names it), kind,
/// capacity and window. Build one with concurrency(), bucket() or window(): they check it.
struct limit {
  limit_kind kind = limit_kind::concurrent;
  std::string key;
  std::int32_t capacity = 1;
  /// bucket and window only.
  std::chrono::milliseconds span{0};

  friend bool operator==(const limit&, const limit&) = default;
};

/// Most bytes of a limiter key or a concurrency key.
inline constexpr std::size_t max_limit_key = 200;
/// Longest window of a bucket or window limiter: a year.
inline constexpr std::int64_t max_limit_window_ms = 365LL * 24 * 3600 * 1000;
/// Largest capacity of a limiter, a per-key limit, or a barrier's parties.
inline constexpr std::int32_t max_limit_capacity = 1'000'000'000;

/// At most `n` at once under `key`. Throws troupe::error(invalid_argument) naming the key for an
/// empty or too long key (max_limit_key) and for n below 1.
limit concurrency(std::string key, std::int32_t n);
/// At most `n` per fixed window of `span` under `key`. The same checks, and a span from 1 ms
/// to a year.
limit bucket(std::string key, std::int32_t n, std::chrono::milliseconds span);
/// At most `n` in any sliding window of `span` under `key`. The same checks.
limit window(std::string key, std::int32_t n, std::chrono::milliseconds span);

/// Throws troupe::error(invalid_argument) naming the key when `l` breaks one of the rules
/// above (for a limit built by hand).
void validate_limit(const limit& l);

/// What a guard throws when its limiter has no room. A task that lets it through fails its
/// attempt like any other exception: the retry policy decides when it runs again.
class limit_refused : public std::runtime_error {
public:
  explicit limit_refused(const std::string& key);
  const std::string& key() const noexcept { return key_; }

private:
  std::string key_;
};

/// How a node's tasks reach the node's limiter actor: set on each task_context by the node
/// (none outside a node). Implementations block the calling thread, never an actor.
class coordination_port {
public:
  /// Takes a slot of `l` for `holder` until `ttl`; whether it holds one.
  virtual bool acquire(const limit& l, const std::string& holder,
                       std::chrono::milliseconds ttl) = 0;
  virtual void release(const limit& l, const std::string& holder) = 0;
  /// The limiters the node declares by key ([limits] in troupe.ini, node_options::limits).
  virtual const std::vector<limit>& declared() const noexcept = 0;

protected:
  ~coordination_port() = default;
};

/// The default TTL of a guard's concurrent slot: past it the slot counts as free even if its
/// holder lives (a holder's death frees it sooner, see limit_kind::concurrent).
inline constexpr std::chrono::milliseconds default_guard_ttl = std::chrono::minutes(15);

/// Holds one acquisition of a limiter for a scope. The constructors acquire or throw
/// limit_refused; try_acquire returns none instead. A concurrent slot is given back when the
/// guard is destroyed (or release() is called); bucket and window acquisitions are spent.
/// Other errors (the database cannot be reached, a limiter of another kind under the same
/// key) are troupe::error. Movable, not copyable.
class limit_guard {
public:
  /// Inside a task on a node: through the node's limiter actor. Outside a node (a context
  /// without a coordination port) throws troupe::error(invalid_argument).
  limit_guard(const task_context& ctx, limit l, std::chrono::milliseconds ttl = default_guard_ttl);
  /// Anywhere: through the client's connection.
  limit_guard(client& c, limit l, std::chrono::milliseconds ttl = default_guard_ttl);

  static std::optional<limit_guard> try_acquire(const task_context& ctx, limit l,
                                                std::chrono::milliseconds ttl = default_guard_ttl);
  /// Inside a task on a node, the limiter the node declares under `key` (declared_limit).
  limit_guard(const task_context& ctx, std::string_view key,
              std::chrono::milliseconds ttl = default_guard_ttl);
  static std::optional<limit_guard> try_acquire(const task_context& ctx, std::string_view key,
                                                std::chrono::milliseconds ttl = default_guard_ttl);
  static std::optional<limit_guard> try_acquire(client& c, limit l,
                                                std::chrono::milliseconds ttl = default_guard_ttl);

  limit_guard(limit_guard&&) noexcept;
  limit_guard& operator=(limit_guard&&) noexcept;
  ~limit_guard();

  /// Gives a concurrent slot back now (at most once; a release that fails is logged, and the
  /// slot is free at its TTL or with its node).
  void release() noexcept;
  const limit& held() const noexcept;

  struct backend;

private:
  explicit limit_guard(std::unique_ptr<backend> b);
  std::unique_ptr<backend> b_;
};

/// The limiter that the node running `ctx` declares under `key` (its [limits] section in
/// troupe.ini, or node_options::limits). Throws troupe::error(invalid_argument) naming the key
/// and the keys the node declares when it declares none of that key, or outside a node.
const limit& declared_limit(const task_context& ctx, std::string_view key);

/// How much of `l` is taken now, read from the database: live slots of a concurrent limiter,
/// acquisitions in the last window of a window limiter, or in the current window of a bucket.
std::int64_t limit_in_use(client& c, const limit& l);

/// The default TTL of a barrier: how long it exists after its creation.
inline constexpr std::chrono::milliseconds default_barrier_ttl = std::chrono::minutes(15);

/// A barrier for `parties` arrivals under a key: each party's wait() arrives, and blocks until
/// the last one has. Its release stays visible until the barrier expires (its TTL from its
/// creation), so a party that comes late or missed the notification still sees it. Keys are
/// the area's (a barrier and a limiter cannot share one). From an actor, use the limiter
/// actor instead (<troupe/caf.hpp>).
class barrier {
public:
  /// Throws troupe::error(invalid_argument) naming the key for an empty or too long key or a
  /// TTL of 0 or less.
  barrier(client& c, std::string key, std::chrono::milliseconds ttl = default_barrier_ttl);

  /// Creates the barrier for `parties` (1 or more): true when this call created it, false when
  /// it exists already with that many parties. Throws troupe::error(invalid_argument) naming
  /// the key when it exists with another count, or parties is below 1.
  bool create(std::int32_t parties);
  /// Arrives and waits until the barrier is released or `timeout` passes: whether it was
  /// released. Woken by the release's notification, polling twice a second in case one is
  /// missed. Throws troupe::error(not_found) when the barrier does not exist (or expired).
  bool wait(std::chrono::milliseconds timeout);
  /// Arrives without waiting: whether the barrier is released now.
  bool arrive();
  /// Whether the barrier is released, without arriving. Throws troupe::error(not_found) as wait.
  bool released();
  const std::string& key() const noexcept { return key_; }

private:
  client* client_;
  std::string key_;
  std::chrono::milliseconds ttl_;
};

namespace detail {
/// The options JSON with "limits" holding `ls` (replacing any), or `options_json` unchanged
/// for an empty list.
std::string with_limits_option(std::string_view options_json, const std::vector<limit>& ls);
/// The first fault of the coordination options of a message ("limits", "concurrency_key",
/// "concurrency_limit"), naming the key; none when they are sound or absent.
std::optional<std::string> check_coordination_options(std::string_view options_json);
} // namespace detail

} // namespace troupe
