// A worker node's settings as the operator writes them: troupe.ini, then TROUPE_DSN, then
// command-line flags, validated at once with errors naming the key. No CAF in this header; the
// CAF parsing stays in settings.cpp. The reference of every option is docs/configuration.md.
#pragma once

#include "troupe/node_options.hpp"

#include <string>
#include <vector>

namespace troupe::config {

/// The [logging] section: what troupe::configure_logging takes.
struct logging_settings {
  /// One of trace, debug, info, warn, error, critical, off.
  std::string level = "info";
  /// Only "text" so far.
  std::string format = "text";
};

/// Everything the loader produces for one worker node.
struct settings {
  troupe::node_options node;
  logging_settings logging;
  /// The path of the INI file actually read; empty when none was.
  std::string config_file;
  /// True when CAF printed a help text or a config dump (--help, -h, --long-help,
  /// --dump-config) to stdout: the caller should exit 0 without starting a node. The other
  /// members are then left at their defaults and nothing was validated.
  bool help_printed = false;
};

/// Loads settings: the INI file (`--config-file=PATH` flag, else ./troupe.ini if it exists; an
/// explicitly named file that is missing is an error), then TROUPE_DSN (overrides database.dsn),
/// then flags (`--section.key=value`, see docs/configuration.md).
/// Throws troupe::error(errc::invalid_argument) whose text names the key and why (e.g.
/// `queues.emails.concurrency: expected an integer, got "x"`,
/// `unknown key "node.concurency" in troupe.ini`). A DSN password never appears in it.
settings load(int argc, char** argv);

/// The same from INI text (for tests): no file, no environment unless `env_dsn` is given.
/// `flags` are command-line arguments without the program name; `--config-file` is refused.
settings load_from_string(const std::string& ini_text, const std::vector<std::string>& flags = {},
                          const char* env_dsn = nullptr);

/// Text of a complete troupe.ini with every option at its default, each with a comment (what
/// `hello-worker --dump-default-config` prints).
std::string default_config_text();

} // namespace troupe::config
