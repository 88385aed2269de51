// Troupe errors as CAF errors (category "troupe"), for replies between actors.
#include "troupe/caf.hpp"

namespace troupe {

caf::error make_caf_error(errc code, std::string text) {
  return caf::error{static_cast<std::uint8_t>(code), caf::atom("troupe"),
                    caf::make_message(std::move(text))};
}

std::string describe(const caf::error& err) {
  if (err.category() == caf::atom("troupe")) {
    std::string text;
    if (err.context().match_elements<std::string>())
      text = err.context().get_as<std::string>(0);
    return std::string(to_string(static_cast<errc>(err.code()))) + ": " + text;
  }
  return caf::to_string(err);
}

} // namespace troupe
