// Fuzzes the argument and result decoder (decode_args, decode_value) with what a row's `args`
// or `result` can hold: any bytes. A decode either succeeds or throws troupe::error
// (decode_failed); what decodes encodes back to JSON that decodes to the same values (doubles are
// only decoded: NaN is not equal to itself).
#include "troupe/error.hpp"
#include "troupe/json.hpp"

#include <cstdint>
#include <cstdlib>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace {

template <class... Ts>
void round_trip(std::string_view json) {
  try {
    auto values = troupe::decode_args<Ts...>(json);
    auto again = std::apply(
      [](const auto&... xs) { return troupe::decode_args<Ts...>(troupe::encode_args(xs...)); },
      values);
    if (again != values)
      std::abort(); // what decoded must encode back to the same values
  } catch (const troupe::error& e) {
    if (e.code() != troupe::errc::decode_failed)
      std::abort();
  }
}

template <class T>
void one_value(std::string_view json) {
  try {
    (void)troupe::decode_value<T>(json);
  } catch (const troupe::error& e) {
    if (e.code() != troupe::errc::decode_failed)
      std::abort();
  }
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view json(reinterpret_cast<const char*>(data), size);
  round_trip<int>(json);
  round_trip<std::int64_t, std::string>(json);
  round_trip<std::vector<int>>(json);
  round_trip<std::string, bool>(json);
  round_trip<std::map<std::string, std::int64_t>>(json);
  round_trip<std::vector<std::string>, std::int64_t>(json);
  one_value<std::int64_t>(json);
  one_value<std::string>(json);
  one_value<std::vector<double>>(json);
  return 0;
}
