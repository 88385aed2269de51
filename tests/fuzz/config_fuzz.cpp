// Fuzzes the troupe.ini loader (CAF's INI parser, then Troupe's checks) with any text: it either
// loads settings that pass validation or throws troupe::error(invalid_argument) naming what is
// wrong; a password written in the text never appears in the error.
#include "troupe/config.hpp"
#include "troupe/error.hpp"
#include "troupe/node_options.hpp"

#include <cstdint>
#include <cstdlib>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  try {
    auto s = troupe::config::load_from_string(text);
    troupe::validate(s.node); // what loads is valid
  } catch (const troupe::error& e) {
    if (e.code() != troupe::errc::invalid_argument)
      std::abort();
    // Seeds carry "password=fuzz-s3cret" in a DSN: while that setting is intact, an error about
    // the DSN never echoes the password. (A mangled keyword is no longer a password setting:
    // libpq quotes what it could not read, and Troupe withholds that only when the text holds
    // the word "password" or an '@'.)
    std::string what = e.what();
    if (text.find("password=fuzz-s3cret") != std::string::npos &&
        what.rfind("database.dsn", 0) == 0 && what.find("fuzz-s3cret") != std::string::npos)
      std::abort();
  }
  return 0;
}
