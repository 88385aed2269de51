#include "troupe/message.hpp"

#include "troupe/area.hpp"
#include "troupe/error.hpp"
#include "troupe/limits.hpp"
#include "troupe/options.hpp"

#include <fmt/format.h>

#include <array>
#include <chrono>
#include <random>

namespace troupe {

namespace {

std::int64_t unix_ms() {
  using namespace std::chrono;
  return duration_cast<milliseconds>(system_clock::now().time_since_epoch()).count();
}

constexpr char hex_digits[] = "0123456789abcdef";

} // namespace

std::string new_message_id() {
  // 48 bits of Unix milliseconds, a 12-bit counter that keeps ids of one thread ordered within a
  // millisecond, and 62 random bits: ids sort by creation time, so the primary key grows at its
  // right edge instead of splitting random pages.
  thread_local std::mt19937_64 rng{std::random_device{}()};
  thread_local std::int64_t last_ms = 0;
  thread_local std::uint16_t counter = 0;
  auto ms = unix_ms();
  if (ms <= last_ms) {
    if (++counter > 0x0fff) {
      ++last_ms;
      counter = 0;
    }
    ms = last_ms;
  } else {
    last_ms = ms;
    counter = static_cast<std::uint16_t>(rng() & 0x01ff);
  }
  std::array<unsigned char, 16> b{};
  for (int i = 0; i < 6; ++i)
    b[i] = static_cast<unsigned char>(static_cast<std::uint64_t>(ms) >> (40 - 8 * i));
  b[6] = static_cast<unsigned char>(0x70 | (counter >> 8));
  b[7] = static_cast<unsigned char>(counter & 0xff);
  auto r = rng();
  for (int i = 8; i < 16; ++i)
    b[i] = static_cast<unsigned char>(r >> (8 * (i - 8)));
  b[8] = static_cast<unsigned char>(0x80 | (b[8] & 0x3f));
  std::string out;
  out.reserve(36);
  for (int i = 0; i < 16; ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10)
      out.push_back('-');
    out.push_back(hex_digits[b[i] >> 4]);
    out.push_back(hex_digits[b[i] & 0x0f]);
  }
  return out;
}

namespace {

// Each character's value as a hex digit, or -1.
constexpr std::array<std::int8_t, 256> hex_values = [] {
  std::array<std::int8_t, 256> t{};
  for (auto& v : t)
    v = -1;
  for (int c = 0; c < 10; ++c)
    t['0' + c] = static_cast<std::int8_t>(c);
  for (int c = 0; c < 6; ++c) {
    t['a' + c] = static_cast<std::int8_t>(10 + c);
    t['A' + c] = static_cast<std::int8_t>(10 + c);
  }
  return t;
}();

// The 32 digit values of a UUID spelled any way PostgreSQL's uuid input takes, no more:
// optional braces around 32 hex digits, with at most one hyphen after any group of four (but
// not after the last). Batches written with COPY do not go through that input, so this check
// is the one that counts.
bool uuid_digits(std::string_view text, std::int8_t (&digits)[32]) {
  // The canonical spelling (every id Troupe makes) first, without the general loop.
  if (text.size() == 36 && text[8] == '-' && text[13] == '-' && text[18] == '-' &&
      text[23] == '-') {
    std::int8_t bad = 0;
    std::size_t n = 0;
    for (std::size_t i = 0; i < 36; ++i) {
      if (i == 8 || i == 13 || i == 18 || i == 23)
        continue;
      auto v = hex_values[static_cast<unsigned char>(text[i])];
      bad |= v; // -1 sets the sign bit
      digits[n++] = v;
    }
    return bad >= 0;
  }
  if (!text.empty() && text.front() == '{') {
    if (text.size() < 2 || text.back() != '}')
      return false;
    text = text.substr(1, text.size() - 2);
  }
  std::size_t n = 0;
  for (std::size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (c == '-') {
      if (n == 0 || n % 4 != 0 || n == 32 || text[i - 1] == '-')
        return false;
      continue;
    }
    auto v = hex_values[static_cast<unsigned char>(c)];
    if (n == 32 || v < 0)
      return false;
    digits[n++] = v;
  }
  return n == 32;
}

} // namespace

bool parse_uuid_bytes(std::string_view text, unsigned char (&bytes)[16]) {
  std::int8_t digits[32];
  if (!uuid_digits(text, digits))
    return false;
  for (std::size_t i = 0; i < 16; ++i)
    bytes[i] = static_cast<unsigned char>((digits[2 * i] << 4) | digits[2 * i + 1]);
  return true;
}

bool parse_uuid(std::string_view text, std::string& canonical) {
  std::int8_t digits[32];
  if (!uuid_digits(text, digits))
    return false;
  constexpr const char* spelled = "0123456789abcdef";
  canonical.resize(36);
  for (std::size_t i = 0, o = 0; i < 32; ++i) {
    if (i == 8 || i == 12 || i == 16 || i == 20)
      canonical[o++] = '-';
    canonical[o++] = spelled[digits[i]];
  }
  return true;
}

void validate_message(const message& m) {
  validate_queue_name(m.queue);
  unsigned char bytes[16];
  if (!parse_uuid_bytes(m.id, bytes))
    throw error(errc::invalid_argument, "message id \"" + m.id + "\" is not a UUID");
  if (m.task.empty())
    throw error(errc::invalid_argument, "message " + m.id + " has no task name");
  if (m.task.size() > limits::max_task_name)
    throw error(errc::invalid_argument,
                fmt::format("message {}: its task name is {} bytes long, longer than the {} "
                            "allowed",
                            m.id, m.task.size(), limits::max_task_name));
  if (m.delay_ms < 0 || m.delay_ms > limits::max_delay_ms)
    throw error(errc::invalid_argument,
                fmt::format("message {}: delay {}ms is out of range (0 to {}ms, ten years)", m.id,
                            m.delay_ms, limits::max_delay_ms));
  if (m.timestamp_ms < 0 || m.timestamp_ms > limits::max_timestamp_ms)
    throw error(errc::invalid_argument,
                fmt::format("message {}: timestamp {} is out of range (0 to {}, Unix "
                            "milliseconds)",
                            m.id, m.timestamp_ms, limits::max_timestamp_ms));
  if (m.args_json.size() + m.options_json.size() > limits::max_message_bytes)
    throw error(errc::invalid_argument,
                fmt::format("message {}: its arguments and options are {} bytes, more than the "
                            "{} a message may hold",
                            m.id, m.args_json.size() + m.options_json.size(),
                            limits::max_message_bytes));
  if (auto fault = limits::check_message_options(m.options_json))
    throw error(errc::invalid_argument,
                fmt::format("message {}: invalid options: {}", m.id, *fault));
}

namespace {

// Whether `id` is already spelled as PostgreSQL prints a uuid: 36 characters, lower-case hex,
// hyphens after the 8th, 12th, 16th and 20th digit (what new_message_id makes).
bool is_canonical_uuid(std::string_view id) {
  if (id.size() != 36)
    return false;
  for (std::size_t i = 0; i < id.size(); ++i) {
    char c = id[i];
    bool hyphen = i == 8 || i == 13 || i == 18 || i == 23;
    if (hyphen ? c != '-' : !((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')))
      return false;
  }
  return true;
}

} // namespace

void normalize_message(message& m) {
  validate_message(m);
  if (is_canonical_uuid(m.id))
    return;
  std::string canonical;
  parse_uuid(m.id, canonical); // validated above
  m.id = std::move(canonical);
}

namespace {

// `m` with option `key` set to `value` (an integer, a string or a boolean).
template <class T>
message with_message_option(const message& m, std::string_view key, T value) {
  auto copy = m;
  copy.options_json = with_option(m.options_json, key, value);
  return copy;
}

message with_positive_duration(const message& m, std::string_view key,
                               std::chrono::milliseconds d) {
  if (d.count() <= 0 || d.count() > limits::max_option_ms)
    throw error(errc::invalid_argument,
                fmt::format("the message option {} must be a positive number of milliseconds "
                            "up to {} (a year), got {}ms",
                            key, limits::max_option_ms, d.count()));
  return with_message_option(m, key, static_cast<std::int64_t>(d.count()));
}

} // namespace

message message::with_max_retries(std::int32_t retries) const {
  if (retries < 0 || retries > limits::max_retries)
    throw error(errc::invalid_argument,
                fmt::format("the message option max_retries must be between 0 and {}, got {}",
                            limits::max_retries, retries));
  return with_message_option(*this, "max_retries", static_cast<std::int64_t>(retries));
}

message message::with_min_backoff(std::chrono::milliseconds backoff) const {
  return with_positive_duration(*this, "min_backoff", backoff);
}

message message::with_max_backoff(std::chrono::milliseconds backoff) const {
  return with_positive_duration(*this, "max_backoff", backoff);
}

message message::with_max_age(std::chrono::milliseconds age) const {
  return with_positive_duration(*this, "max_age", age);
}

message message::with_time_limit(std::chrono::milliseconds limit) const {
  return with_positive_duration(*this, "time_limit", limit);
}

message message::with_result_ttl(std::chrono::milliseconds ttl) const {
  return with_positive_duration(*this, "result_ttl", ttl);
}

message message::with_on_success(std::string task) const {
  return with_message_option(*this, "on_success", std::string_view(task));
}

message message::with_on_failure(std::string task) const {
  return with_message_option(*this, "on_failure", std::string_view(task));
}

message message::with_on_retry_exhausted(std::string task) const {
  return with_message_option(*this, "on_retry_exhausted", std::string_view(task));
}

message message::with_store_results(bool store) const {
  return with_message_option(*this, "store_results", store);
}

message message::with_notify_shutdown(bool notify) const {
  return with_message_option(*this, "notify_shutdown", notify);
}

message make_message(std::string queue, std::string task, std::string args_json) {
  validate_queue_name(queue);
  if (task.empty())
    throw error(errc::invalid_argument, "a message needs a task name");
  message m;
  m.id = new_message_id();
  m.queue = std::move(queue);
  m.task = std::move(task);
  m.args_json = std::move(args_json);
  m.timestamp_ms = unix_ms();
  return m;
}

} // namespace troupe
