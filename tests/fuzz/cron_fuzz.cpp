// Fuzzes the cron parser and its next-firing rule: the input is an expression, then a newline
// and a time zone name. Parsing either succeeds or throws troupe::error(invalid_argument); a
// parsed schedule's next occurrences come strictly later, one after the other.
#include "troupe/cron.hpp"
#include "troupe/error.hpp"

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view input(reinterpret_cast<const char*>(data), size);
  auto newline = input.find('\n');
  auto expression = input.substr(0, newline);
  auto zone =
    newline == std::string_view::npos ? std::string_view("UTC") : input.substr(newline + 1, 64);
  try {
    auto cron = troupe::cron_schedule::parse(expression, zone);
    // 2026-03-29 00:30 UTC: a spring-forward day in Europe.
    auto t = std::chrono::system_clock::time_point{std::chrono::seconds(1774744200)};
    for (int i = 0; i < 4; ++i) {
      auto next = cron.next_after(t);
      if (next <= t)
        std::abort();
      t = next;
    }
  } catch (const troupe::error& e) {
    if (e.code() != troupe::errc::invalid_argument)
      std::abort();
  }
  return 0;
}
