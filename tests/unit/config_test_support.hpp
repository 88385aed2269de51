// What the config suites share: the text of the error a load throws, and a load of flags.
#pragma once

#include "troupe/config.hpp"
#include "troupe/error.hpp"

#include <caf/test/unit_test.hpp>

#include <functional>
#include <string>
#include <vector>

namespace troupe::config_test {

/// The text of the troupe::error `f` throws, or "(no error)".
inline std::string error_text(const std::function<void()>& f) {
  try {
    f();
  } catch (const troupe::error& e) {
    if (e.code() != troupe::errc::invalid_argument)
      return "(wrong error code) " + std::string(e.what());
    return e.what();
  }
  return "(no error)";
}

inline bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

/// Fails (showing the text at the default verbosity) unless loading throws a text with `part`.
#define CHECK_ERROR_HAS(expr, part)                                                                \
  do {                                                                                             \
    auto text_ = error_text([&] { (void)(expr); });                                                \
    if (!contains(text_, part))                                                                    \
      CAF_TEST_PRINT_ERROR("error text: " << text_);                                               \
    CAF_CHECK(contains(text_, part));                                                              \
  } while (false)

/// Calls load(argc, argv) with `args` after a program name.
inline troupe::config::settings load_args(std::vector<std::string> args) {
  args.insert(args.begin(), "troupe-worker");
  std::vector<char*> argv;
  for (auto& a : args)
    argv.push_back(a.data());
  argv.push_back(nullptr);
  return troupe::config::load(static_cast<int>(args.size()), argv.data());
}

} // namespace troupe::config_test
