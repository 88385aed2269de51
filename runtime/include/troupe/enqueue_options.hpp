// Per-message publishing options: a delay, and a deduplication key with its lifetime. One entry
// per message of a batch (or one for a single publish).
#pragma once

#include <chrono>
#include <cstddef>
#include <optional>
#include <string>
#include <vector>

namespace troupe {

struct message;

/// How one message is published. The defaults publish it as it is.
struct enqueue_options {
  /// Earliest start relative to the enqueue (PostgreSQL's clock); replaces the message's own
  /// delay when set. Must not be negative.
  std::optional<std::chrono::milliseconds> delay;
  /// Publishes the message only if no live message holds this key on its queue; otherwise
  /// the publish returns the message that holds it (same id, arguments and delay), writing
  /// nothing and running no enqueue hook. Empty: no deduplication.
  std::string deduplication_key;
  /// How long the key stays live after this publish claims it (PostgreSQL's clock). Required,
  /// and positive, with a key.
  std::chrono::milliseconds deduplication_ttl{0};

  /// Options with only a delay.
  static enqueue_options delayed(std::chrono::milliseconds d) {
    enqueue_options o;
    o.delay = d;
    return o;
  }
  /// Options with only a deduplication key and its lifetime.
  static enqueue_options deduplicated(std::string key, std::chrono::milliseconds ttl) {
    enqueue_options o;
    o.deduplication_key = std::move(key);
    o.deduplication_ttl = ttl;
    return o;
  }
};

/// The most messages one batch may hold.
inline constexpr std::size_t max_batch_size = 1000;

/// Throws troupe::error(invalid_argument) before any database access when a batch cannot be
/// published as given: more than max_batch_size messages ("batch limit is 1000 messages"),
/// an options list that is neither empty nor one entry per message ("options must match
/// messages"), or an invalid entry ("invalid enqueue options for message N: ...").
void validate_enqueue_input(const std::vector<message>& batch,
                            const std::vector<enqueue_options>& options);

} // namespace troupe
