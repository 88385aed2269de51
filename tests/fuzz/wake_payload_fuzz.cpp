// Fuzzes the reading of a wake notification's payload (any bytes another session may send with
// pg_notify on the area's channel): it is a queue name, validated as every queue name is, or it
// is ignored. What is accepted is a valid queue name, unchanged.
#include "actors/wake_payload.hpp"

#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view payload(reinterpret_cast<const char*>(data), size);
  std::string queue;
  if (troupe::actors::parse_wake_payload(payload, queue)) {
    if (queue != payload || queue.empty() || queue.size() > 47)
      std::abort();
    for (unsigned char c : queue)
      if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '.' || c == '-'))
        std::abort();
  }
  return 0;
}
