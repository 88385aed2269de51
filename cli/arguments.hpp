// Reading the `troupe` command line: options as typed, a cursor over the arguments, and the
// checks and errors every verb's parser shares (cli/command_line.cpp, cli/states_command.cpp).
#pragma once

#include "cli/command_line.hpp"
#include "troupe/error.hpp"

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace troupe::cli {

/// One option as typed: `--name value` or `--name=value`.
struct option_token {
  std::string_view name;
  std::optional<std::string_view> inline_value;
};

bool is_option(std::string_view arg);
option_token split_option(std::string_view arg);
bool is_help(std::string_view name);
bool is_global_option(std::string_view name);

/// Text typed by the user, safe to echo in an error: a DSN typed in the wrong place shows no
/// password.
std::string echo(std::string_view typed);

/// Walks the arguments left to right; owns no data beyond the caller's vector.
class argument_cursor {
public:
  explicit argument_cursor(const std::vector<std::string_view>& args) : args_(args) {}

  bool done() const noexcept { return pos_ >= args_.size(); }
  std::string_view peek() const { return args_[pos_]; }
  std::string_view next() { return args_[pos_++]; }

  /// The value of option `opt`: its `=value` part, or the next argument.
  std::string_view value_of(const option_token& opt);

private:
  const std::vector<std::string_view>& args_;
  std::size_t pos_ = 0;
};

void reject_value(const option_token& opt);
[[noreturn]] void unknown_option(const option_token& opt, std::string_view verb_name);
[[noreturn]] void unexpected_argument(std::string_view arg, std::string_view verb_name);

/// Runs a validator from troupe/area.hpp, turning its error (which quotes the value) into a
/// usage error.
template <class Validate>
void validate(Validate&& check) {
  try {
    check();
  } catch (const troupe::error& e) {
    throw usage_error(echo(e.what()));
  }
}

/// An integer from 1 to 1000 (a page size).
std::int32_t parse_limit(std::string_view text, std::string_view option);
/// A non-negative integer (an offset).
std::int64_t parse_count(std::string_view text, std::string_view option);
std::string parse_message_id(std::string_view text, std::string_view what);
/// A queue name, checked by the rule every part of Troupe uses (troupe::validate_queue_name).
std::string parse_queue(std::string_view text);

/// A duration: a whole number and a unit (ms, s, min, h, d), such as "90s" or "5min".
std::chrono::milliseconds parse_duration(std::string_view text, std::string_view option);
/// An ISO-8601 time with its offset ("2026-12-01T02:30:00Z", "...+01:00"), in Unix ms.
std::int64_t parse_time(std::string_view text, std::string_view option);

/// `troupe schedule SUB ...` and `troupe scheduler ...` (cli/schedule_options.cpp).
void parse_schedule_options(argument_cursor& cur, command_line& cl);
void parse_scheduler_options(argument_cursor& cur, command_line& cl);
// cli/exporter_command.cpp
void parse_exporter_options(argument_cursor& cur, command_line& cl);
// cli/dashboard_command.cpp
void parse_dashboard_options(argument_cursor& cur, command_line& cl);

/// The options of `troupe states` (cli/states_command.cpp), after the verb.
void parse_states_options(argument_cursor& cur, command_line& cl);
/// `troupe history SUB ...` (cli/history_command.cpp), after the verb.
void parse_history_options(argument_cursor& cur, command_line& cl);

} // namespace troupe::cli
