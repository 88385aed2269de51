// PostgreSQL connection strings (DSNs): one rule for checking them and one for keeping their
// passwords out of logs and errors, shared by the client, worker nodes, the config loader and
// the `troupe` command.
//
// A DSN is what libpq's PQconnectdbParams takes with expand_dbname: empty (libpq's PG*
// environment variables decide), a `key=value ...` connection string, a `postgresql://` or
// `postgres://` URI, or any other word, which libpq takes as a database name.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace troupe {

/// Throws troupe::error(invalid_argument) when libpq cannot parse `dsn`: "invalid PostgreSQL
/// connection string: <libpq's explanation>". libpq's explanation can quote pieces of the
/// string, so it is left out when the string could hold a password. Never connects.
void validate_dsn(std::string_view dsn);

/// Whether validate_dsn accepts `dsn`.
bool is_valid_dsn(std::string_view dsn) noexcept;

/// The value `dsn` gives keyword `key` (such as "options" or "host"), as libpq parses it; none
/// when the DSN does not set it (an empty DSN, a bare database name for any key but "dbname")
/// or cannot be parsed.
std::optional<std::string> dsn_option(std::string_view dsn, std::string_view key);

/// `dsn` for logs and errors: rebuilt from libpq's own parse with any password replaced by
/// "***" (every spelling libpq accepts: quoted values, escapes, URIs, percent-encoding). An
/// empty DSN stays empty, a database name becomes `dbname=NAME`, and a string libpq cannot
/// parse is never echoed: "<unparsable connection string>".
std::string redact_dsn(std::string_view dsn);

/// Any text (an argument, an error message) with what looks like a password in it replaced by
/// "***": `password=...` (quoted or not) and the password of a `scheme://user:password@host`
/// URI.
std::string redact_secrets(std::string_view text);

} // namespace troupe
