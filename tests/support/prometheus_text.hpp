// For suites that scrape a Prometheus endpoint: a sample's value by its series, and what
// `promtool check metrics` (Debian's prometheus package) says of a scrape.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
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
  auto cmd = std::string("promtool check metrics < ") + path + " 2>&1";
  FILE* p = ::popen(cmd.c_str(), "r");
  char buf[4096];
  while (auto n = std::fread(buf, 1, sizeof buf, p))
    v.output.append(buf, n);
  int status = ::pclose(p);
  v.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  ::unlink(path);
  return v;
}

/// Whether a missing tool must fail the suite rather than skip its check: under CI=true.
inline bool skips_are_failures() {
  const char* ci = std::getenv("CI");
  return ci && std::string(ci) == "true";
}

} // namespace troupe::testkit
