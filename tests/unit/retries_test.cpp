// The retry schedule (troupe::retry_backoff), checked over many draws: every delay inside its
// interval, and both ends of the interval reached. (The retries middleware's decisions are
// tested through actors::execute in execute_test.cpp.)
#define CAF_SUITE retries_backoff
#include <caf/test/unit_test.hpp>

#include "troupe/middleware.hpp"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <limits>
#include <string>

using namespace troupe;
using namespace std::chrono_literals;
using std::chrono::milliseconds;

namespace {

constexpr std::int64_t seven_days = 7LL * 24 * 3600 * 1000;
constexpr int draws = 1000;

// The smallest and largest of `draws` delays.
struct spread {
  std::int64_t low = std::numeric_limits<std::int64_t>::max();
  std::int64_t high = std::numeric_limits<std::int64_t>::min();
};

spread draw(std::int32_t retries, milliseconds min_backoff, milliseconds max_backoff) {
  spread s;
  for (int i = 0; i < draws; ++i) {
    auto d = retry_backoff(retries, min_backoff, max_backoff).count();
    s.low = std::min(s.low, d);
    s.high = std::max(s.high, d);
  }
  return s;
}

// What is wrong with the draws: empty when every draw lies in [from, to] and the draws come
// within 5% of the interval's width of both ends.
std::string misfit(const spread& s, std::int64_t from, std::int64_t to) {
  auto slack = (to - from) / 20;
  if (s.low >= from && s.high <= to && s.low <= from + slack && s.high >= to - slack)
    return {};
  return "draws in [" + std::to_string(s.low) + ", " + std::to_string(s.high) +
         "], expected to fill [" + std::to_string(from) + ", " + std::to_string(to) + "]";
}

} // namespace

CAF_TEST(retry n waits a draw between min_backoff times 2 to the n - 1 and 2 to the n) {
  for (std::int32_t retries = 0; retries <= 14; ++retries) {
    // 15 s * 2^14 is about 68 h, well below the 7 days.
    auto from = 15'000LL << retries;
    auto s = draw(retries, 15s, milliseconds(seven_days));
    CAF_CHECK_EQUAL(misfit(s, from, 2 * from), "");
  }
}

CAF_TEST(the first retry is jittered) {
  auto s = draw(0, 15s, milliseconds(seven_days));
  CAF_CHECK_EQUAL(misfit(s, 15'000, 30'000), "");
  CAF_CHECK(s.high - s.low > 10'000);
  auto small = draw(0, 100ms, 1s);
  CAF_CHECK_EQUAL(misfit(small, 100, 200), "");
}

CAF_TEST(a draw above max_backoff becomes a draw in its upper half) {
  // Every draw of [1024 s, 2048 s] is above 5 s.
  CAF_CHECK_EQUAL(misfit(draw(10, 1s, 5s), 2'500, 5'000), "");
  // [1 s, 2 s] straddles 1.5 s: draws above it are drawn again from [0.75 s, 1.5 s].
  auto s = draw(0, 1s, 1500ms);
  CAF_CHECK_EQUAL(misfit(s, 750, 1'500), "");
  // With the defaults: the 16th retry (15 retries so far) reaches the 7 days.
  CAF_CHECK_EQUAL(misfit(draw(15, 15s, milliseconds(seven_days)), seven_days / 2, seven_days), "");
  // A min_backoff above max_backoff: every draw is capped.
  CAF_CHECK_EQUAL(misfit(draw(0, 10s, 4s), 2'000, 4'000), "");
}

CAF_TEST(max_backoff counts as at most 7 days) {
  CAF_CHECK_EQUAL(longest_retry_backoff.count(), seven_days);
  CAF_CHECK_EQUAL(misfit(draw(30, 15s, 30 * 24h), seven_days / 2, seven_days), "");
  CAF_CHECK_EQUAL(misfit(draw(30, 15s, milliseconds::max()), seven_days / 2, seven_days), "");
  // Below the clamp, max_backoff applies as it is.
  CAF_CHECK_EQUAL(misfit(draw(30, 15s, 24h), 12 * 3600 * 1000, 24 * 3600 * 1000), "");
}

CAF_TEST(large retry counts and backoffs do not overflow) {
  for (std::int32_t retries :
       {31, 32, 33, 62, 63, 64, 1000, std::numeric_limits<std::int32_t>::max()})
    CAF_CHECK_EQUAL(
      misfit(draw(retries, 15s, milliseconds(seven_days)), seven_days / 2, seven_days), "");
  // A min_backoff whose doubling would pass the largest integer.
  auto huge = milliseconds(std::numeric_limits<std::int64_t>::max() / 4);
  CAF_CHECK_EQUAL(misfit(draw(0, huge, milliseconds(seven_days)), seven_days / 2, seven_days), "");
  CAF_CHECK_EQUAL(misfit(draw(32, huge, milliseconds(seven_days)), seven_days / 2, seven_days), "");
  CAF_CHECK_EQUAL(
    misfit(draw(32, milliseconds::max(), milliseconds::max()), seven_days / 2, seven_days), "");
  // 1 ms * 2^32 (the exponent's cap) is about 50 days: capped too.
  CAF_CHECK_EQUAL(misfit(draw(32, 1ms, milliseconds(seven_days)), seven_days / 2, seven_days), "");
  CAF_CHECK_EQUAL(misfit(draw(28, 1ms, milliseconds(seven_days)), 1LL << 28, 1LL << 29), "");
}

CAF_TEST(negative arguments count as zero) {
  // Negative retries: the first retry's interval.
  CAF_CHECK_EQUAL(misfit(draw(-3, 1s, 1h), 1'000, 2'000), "");
  CAF_CHECK_EQUAL(retry_backoff(5, 0ms, 1h).count(), 0);
  CAF_CHECK_EQUAL(retry_backoff(5, -1s, 1h).count(), 0);
  CAF_CHECK_EQUAL(retry_backoff(5, 1s, -1h).count(), 0);
}
