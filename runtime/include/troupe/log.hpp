// Troupe's logger: one spdlog logger named "troupe". Fields are written as key=value pairs in
// every line (node=, queue=, message=, statement=) so they can be grepped and parsed.
#pragma once

#include <spdlog/spdlog.h>

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

namespace troupe {

/// Longest message of one log line, in bytes: the logger cuts longer ones (saying how long they
/// were), so that no value a user or a database role controls can flood a log.
inline constexpr std::size_t max_log_message = 4096;

/// `text` fit for a log line or a terminal: control characters (newlines, escape sequences,
/// NUL) written as \n, \t, \r or \xNN, a backslash as \\, and anything past `max` bytes cut
/// with a note of the full length. The logger applies it to every message (with
/// max_log_message); call it on a value to bound that value alone more tightly.
std::string loggable(std::string_view text, std::size_t max = 256);

/// The shared logger (created on first use, text format, level info). Its lines go to stderr,
/// each message passed through loggable(message, max_log_message).
spdlog::logger& log();

/// Sets the level ("trace", "debug", "info", "warn", "error", "off") and the format (only
/// "text" so far). Throws troupe::error(invalid_argument) naming a bad value.
void configure_logging(std::string_view level, std::string_view format);

} // namespace troupe
