// For suites that scrape a Prometheus endpoint: a sample's value by its series, and what
// `promtool check metrics` (Debian's prometheus package) says of a scrape.
#pragma once

#include "cli_runner.hpp"

#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>

namespace troupe::testkit {

/// The value of the sample whose series is exactly `series` (`name{labels}` as the endpoint
/// writes it); none when there is no such line.
inline std::optional<double> sample(const std::string& text, const std::string& series) {
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line))
    if (line.size() > series.size() && line.compare(0, series.size(), series) == 0 &&
        line[series.size()] == ' ')
      return std::stod(line.substr(series.size() + 1));
  return std::nullopt;
}

struct promtool_verdict {
  bool available = false; ///< false: promtool is not installed
  int status = -1;
  std::string output;
};

/// Runs `promtool check metrics` on `text`.
inline promtool_verdict promtool_check(const std::string& text) {
  promtool_verdict v;
  if (std::system("command -v promtool >/dev/null 2>&1") != 0)
    return v;
  v.available = true;
  char path[] = "/tmp/troupe-scrape-XXXXXX";
  int fd = ::mkstemp(path);
  ::close(fd);
  std::ofstream(path) << text;
  auto run = run_shell(std::string("promtool check metrics < ") + path + " 2>&1");
  v.status = run.status;
  v.output = std::move(run.out);
  ::unlink(path);
  return v;
}

/// Whether a missing tool must fail the suite rather than skip its check: under CI=true.
inline bool skips_are_failures() {
  const char* ci = std::getenv("CI");
  return ci && std::string(ci) == "true";
}

} // namespace troupe::testkit

/// Checks `text` with promtool: a failure shows promtool's output; a missing promtool skips
/// the check, or fails it under CI=true. For CAF test bodies (and functions they call).
#define CHECK_PROMTOOL(text)                                                                       \
  do {                                                                                             \
    auto verdict_ = troupe::testkit::promtool_check(text);                                         \
    if (verdict_.available) {                                                                      \
      CAF_CHECK_EQUAL(verdict_.status, 0);                                                         \
      if (verdict_.status != 0)                                                                    \
        CAF_MESSAGE("promtool: " << verdict_.output);                                              \
    } else if (troupe::testkit::skips_are_failures()) {                                            \
      CAF_FAIL("promtool is not installed (Debian's prometheus package) and CI=true");             \
    } else {                                                                                       \
      CAF_MESSAGE("skipping promtool check metrics: promtool is not installed");                   \
    }                                                                                              \
  } while (false)
