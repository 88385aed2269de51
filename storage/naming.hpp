// Storage's own names for an area: quoted identifiers, NOTIFY channels and the class of the
// node liveness locks. Values derived from validated identifiers only (troupe/area.hpp).
#pragma once

#include "troupe/area.hpp"

#include <cstdint>
#include <string>
#include <string_view>

namespace troupe::storage {

/// `"x"` with inner quotes doubled: a PostgreSQL quoted identifier.
std::string quote_identifier(std::string_view name);

/// The NOTIFY channel that wakes the area's consumers: "<schema>.<prefix>wake" when it fits 63
/// bytes, otherwise "troupe." followed by a 16-digit hash of the area.
std::string wake_channel(const area& a);

/// The channel that wakes result waiters: "<schema>.<prefix>results", hashed like wake_channel
/// when too long.
std::string results_channel(const area& a);
/// The channel on which a barrier's release is announced (payload: its name).
std::string coordination_channel(const area& a);
/// The advisory lock class of the area's coordination keys (two-key form, key: the hash of
/// the limiter's scope and name).
std::int32_t coordination_lock_class(const area& a);

/// The first key of every node liveness lock of this area (a positive 31-bit hash).
std::int32_t node_lock_class(const area& a);

} // namespace troupe::storage
