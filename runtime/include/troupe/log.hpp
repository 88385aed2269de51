// Troupe's logger: one spdlog logger named "troupe". Fields are written as key=value pairs in
// every line (node=, queue=, message=, statement=) so they can be grepped and parsed.
#pragma once

#include <spdlog/spdlog.h>

#include <memory>
#include <string_view>

namespace troupe {

/// The shared logger (created on first use, text format, level info).
spdlog::logger& log();

/// Sets the level ("trace", "debug", "info", "warn", "error", "off") and the format (only
/// "text" so far). Throws troupe::error(invalid_argument) naming a bad value.
void configure_logging(std::string_view level, std::string_view format);

} // namespace troupe
