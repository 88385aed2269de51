// A `troupe` verb that serves HTTP (exporter, dashboard) in its own process, as a user runs it:
// started on a free port of 127.0.0.1, its output in a file, stopped with SIGTERM.
#pragma once

#include "cli_runner.hpp"
#include "http/http_server.hpp"
#include "scratch_area.hpp"

#include <unistd.h>

#include <csignal>
#include <fstream>
#include <optional>
#include <sstream>
#include <stdexcept>

namespace troupe::testkit {

struct served_process {
  std::string log_path;
  std::optional<child_process> proc;
  std::int32_t port = 0;

  /// Runs `env ENV troupe GLOBAL VERB --listen 127.0.0.1:0 ARGS` (each already quoted; ENV is
  /// what env(1) takes: NAME=VALUE, -u NAME) and waits up to 20 s for its "listening" line.
  served_process(const std::string& global, const std::string& verb, const std::string& args,
                 const std::string& env = "") {
    char path[] = "/tmp/troupe-served-XXXXXX";
    int fd = ::mkstemp(path);
    ::close(fd);
    log_path = path;
    auto cmd = "exec env " + env + " " + shell_quote(sibling_binary("troupe")) + " " + global +
               " " + verb + " --listen 127.0.0.1:0 " + args + " > " + log_path + " 2>&1";
    proc.emplace("/bin/sh", std::vector<std::string>{"-c", cmd});
    bool listening = wait_until(
      [&] {
        auto text = output();
        const std::string mark = "\"listening\":\"127.0.0.1:";
        auto at = text.find(mark);
        if (at == std::string::npos)
          return false;
        port = std::stoi(text.substr(at + mark.size()));
        return true;
      },
      std::chrono::seconds(20));
    if (!listening)
      throw std::runtime_error("troupe " + verb + " did not start: " + output());
  }
  ~served_process() {
    if (proc)
      proc->signal(SIGTERM);
    ::unlink(log_path.c_str());
  }

  std::string output() const {
    std::ifstream in(log_path);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }

  std::string base_url() const { return "http://127.0.0.1:" + std::to_string(port); }

  http::response get(const std::string& path,
                     const std::map<std::string, std::string>& headers = {}) const {
    return http::fetch("127.0.0.1", port, "GET", path, headers);
  }
  http::response post(const std::string& path,
                      const std::map<std::string, std::string>& headers = {}) const {
    return http::fetch("127.0.0.1", port, "POST", path, headers);
  }

  /// SIGTERM; its exit status.
  int stop() {
    proc->signal(SIGTERM);
    return proc->wait(std::chrono::seconds(20));
  }
};

} // namespace troupe::testkit
