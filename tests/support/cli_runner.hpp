// For suites that run the `troupe` command: its output and exit status, with shell quoting.
#pragma once

#include "scratch_area.hpp"

#include <sys/wait.h>

#include <cstdio>
#include <string>

namespace troupe::testkit {

struct run_result {
  int status = -1;
  std::string out; // stdout and stderr together
};

inline std::string shell_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s)
    out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

/// Runs the shell command `cmd` (its stderr joined to stdout by the caller, if wanted) and
/// captures what it prints.
inline run_result run_shell(const std::string& cmd) {
  run_result r;
  FILE* p = ::popen(cmd.c_str(), "r");
  char buf[4096];
  while (auto n = std::fread(buf, 1, sizeof buf, p))
    r.out.append(buf, n);
  int status = ::pclose(p);
  r.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

/// Runs build/bin/troupe with `args` (already quoted as needed), after the environment
/// assignments `env` if any, and captures what it prints.
inline run_result troupe_cli(const std::string& args, const std::string& env = "") {
  return run_shell(env + shell_quote(sibling_binary("troupe")) + " " + args + " 2>&1");
}

} // namespace troupe::testkit
