#include "network_namespace.hpp"

#include "troupe/error.hpp"

#include <fmt/format.h>

#include <signal.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstdio>
#include <regex>
#include <sstream>

namespace troupe::testkit {

namespace {

const char* ip_binary() {
  for (const char* p : {"/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip", "/bin/ip"})
    if (::access(p, X_OK) == 0)
      return p;
  return nullptr;
}

/// `ip` by its path, or by name (the PATH decides) when none was found.
std::string ip_path() {
  const char* p = ip_binary();
  return p ? p : "ip";
}

/// Runs a shell command; returns its exit status and what it printed (stdout and stderr).
std::pair<int, std::string> run(const std::string& command) {
  std::string out;
  FILE* f = ::popen((command + " 2>&1").c_str(), "r");
  if (!f)
    return {127, "popen failed"};
  std::array<char, 512> buf{};
  while (std::fgets(buf.data(), buf.size(), f))
    out += buf.data();
  int status = ::pclose(f);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : 128, out};
}

void must(const std::string& command) {
  auto [status, out] = run(command);
  if (status != 0)
    throw error(errc::bug, fmt::format("`{}` failed ({}): {}", command, status, out));
}

bool process_alive(long pid) {
  return ::kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM;
}

// Namespaces (troupe-PID-I) and links (trPIDhI) of test processes that are gone.
void remove_leftovers(const std::string& ip) {
  std::smatch m;
  auto [s1, namespaces] = run(ip + " netns list");
  static const std::regex ns_name{R"(^troupe-(\d+)-\d+)"};
  std::istringstream ns_lines{namespaces};
  for (std::string line; std::getline(ns_lines, line);)
    if (std::regex_search(line, m, ns_name) && !process_alive(std::stol(m[1])))
      run(fmt::format("{} netns del {}", ip, m[0].str()));
  auto [s2, links] = run(ip + " -o link show");
  static const std::regex link_name{R"(\d+: (tr(\d+)h\d+)[@:])"};
  std::istringstream link_lines{links};
  for (std::string line; std::getline(link_lines, line);)
    if (std::regex_search(line, m, link_name) && !process_alive(std::stol(m[2])))
      run(fmt::format("{} link del {}", ip, m[1].str()));
}

} // namespace

std::string network_namespace::unavailable() {
  if (::geteuid() != 0)
    return "network namespaces need root";
  const char* ip = ip_binary();
  if (!ip)
    return "no `ip` command (Debian package iproute2)";
  auto probe = fmt::format("troupe-probe-{}", ::getpid());
  auto [status, out] = run(fmt::format("{} netns add {}", ip, probe));
  if (status != 0)
    return "cannot create a network namespace: " + out;
  run(fmt::format("{} netns del {}", ip, probe));
  return "";
}

network_namespace::network_namespace(int index) {
  const std::string ip = ip_path();
  remove_leftovers(ip);
  auto pid = ::getpid();
  name_ = fmt::format("troupe-{}-{}", pid, index);
  outside_link_ = fmt::format("tr{}h{}", pid, index);
  auto inside_link = fmt::format("tr{}n{}", pid, index);
  // Four /24s of 169.254.0.0/16 per process (third octet 16 to 239), chosen by the pid, so that
  // runs of two build folders side by side do not share addresses.
  int subnet = 16 + (static_cast<int>(pid) % 56) * 4 + index % 4;
  outside_ = fmt::format("169.254.{}.1", subnet);
  inside_ = fmt::format("169.254.{}.2", subnet);
  try {
    must(fmt::format("{} netns add {}", ip, name_));
    must(fmt::format("{} link add {} type veth peer name {}", ip, outside_link_, inside_link));
    must(fmt::format("{} link set {} netns {}", ip, inside_link, name_));
    must(fmt::format("{} addr add {}/30 dev {}", ip, outside_, outside_link_));
    must(fmt::format("{} link set {} up", ip, outside_link_));
    must(fmt::format("{} netns exec {} {} addr add {}/30 dev {}", ip, name_, ip, inside_,
                     inside_link));
    must(fmt::format("{} netns exec {} {} link set {} up", ip, name_, ip, inside_link));
    must(fmt::format("{} netns exec {} {} link set lo up", ip, name_, ip));
  } catch (...) {
    run(fmt::format("{} link del {}", ip, outside_link_));
    run(fmt::format("{} netns del {}", ip, name_));
    throw;
  }
}

network_namespace::~network_namespace() {
  const std::string ip = ip_path();
  // Deleting one end of a veth pair deletes both.
  run(fmt::format("{} link del {}", ip, outside_link_));
  run(fmt::format("{} netns del {}", ip, name_));
}

void network_namespace::cut() {
  must(fmt::format("{} link set {} down", ip_path(), outside_link_));
}

void network_namespace::restore() {
  must(fmt::format("{} link set {} up", ip_path(), outside_link_));
}

std::pair<std::string, std::vector<std::string>>
network_namespace::command(const std::string& program, const std::vector<std::string>& args) const {
  std::vector<std::string> all{"netns", "exec", name_, program};
  all.insert(all.end(), args.begin(), args.end());
  return {ip_path(), all};
}

} // namespace troupe::testkit
