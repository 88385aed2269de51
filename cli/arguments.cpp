#include "cli/arguments.hpp"

#include "troupe/area.hpp"
#include "troupe/dsn.hpp"
#include "troupe/message.hpp"

#include <charconv>

namespace troupe::cli {

bool is_option(std::string_view arg) {
  return arg.size() > 1 && arg[0] == '-';
}

option_token split_option(std::string_view arg) {
  if (arg.starts_with("--")) {
    if (auto eq = arg.find('='); eq != std::string_view::npos)
      return {arg.substr(0, eq), arg.substr(eq + 1)};
  }
  return {arg, std::nullopt};
}

bool is_help(std::string_view name) {
  return name == "-h" || name == "--help";
}

bool is_global_option(std::string_view name) {
  return name == "--dsn" || name == "--schema" || name == "--prefix";
}

std::string echo(std::string_view typed) {
  return redact_secrets(typed);
}

std::string_view argument_cursor::value_of(const option_token& opt) {
  if (opt.inline_value)
    return *opt.inline_value;
  if (done())
    throw usage_error("option " + std::string(opt.name) + " needs a value");
  return next();
}

void reject_value(const option_token& opt) {
  if (opt.inline_value)
    throw usage_error("option " + std::string(opt.name) + " takes no value");
}

[[noreturn]] void unknown_option(const option_token& opt, std::string_view verb_name) {
  std::string msg = "unknown option " + echo(opt.name) + " for " + std::string(verb_name);
  if (is_global_option(opt.name))
    msg += " (global options go before the verb)";
  throw usage_error(msg);
}

[[noreturn]] void unexpected_argument(std::string_view arg, std::string_view verb_name) {
  throw usage_error("unexpected argument " + echo(arg) + " for " + std::string(verb_name));
}

std::int32_t parse_limit(std::string_view text, std::string_view option) {
  int value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec != std::errc{} || end != text.data() + text.size() || value < 1 ||
      value > 1000)
    throw usage_error("option " + std::string(option) + " needs an integer from 1 to 1000, got \"" +
                      echo(text) + "\"");
  return value;
}

std::string parse_message_id(std::string_view text, std::string_view what) {
  std::string canonical;
  if (!parse_uuid(text, canonical))
    throw usage_error(std::string(what) + " \"" + echo(text) + "\" is not a message id (a UUID)");
  return canonical;
}

std::string parse_queue(std::string_view text) {
  std::string queue(text);
  validate([&] { validate_queue_name(queue); });
  return queue;
}

std::int64_t parse_count(std::string_view text, std::string_view option) {
  std::int64_t value = -1;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec != std::errc{} || end != text.data() + text.size() || value < 0)
    throw usage_error("option " + std::string(option) + " needs a non-negative integer, got \"" +
                      echo(text) + "\"");
  return value;
}

} // namespace troupe::cli
