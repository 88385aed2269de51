// A network namespace joined to this one by a veth pair, for fault tests that cut a worker
// node's link to PostgreSQL (the link goes down; nothing is killed). Addresses come from the
// link-local range 169.254.0.0/16, one /30 per namespace: 169.254.<subnet>.1 on this side (where
// a test's PostgreSQL listens), .2 inside, the subnet chosen by the process id and the index. Needs
// root and `ip` (iproute2). The namespace and its link are removed on destruction; ones left by a
// test process that died are removed by the next construction.
#pragma once

#include <string>
#include <vector>

namespace troupe::testkit {

class network_namespace {
public:
  /// Why namespaces cannot be made here (not root, no `ip`, no permission), or "" when they can.
  static std::string unavailable();

  /// Creates namespace `index` (0 to 3) of this process, on a /30 of its own.
  /// Throws troupe::error(bug) with `ip`'s output when a step fails.
  explicit network_namespace(int index);
  ~network_namespace();
  network_namespace(const network_namespace&) = delete;
  network_namespace& operator=(const network_namespace&) = delete;

  const std::string& name() const noexcept { return name_; }
  /// The address on this side of the link (where the namespace reaches PostgreSQL).
  const std::string& outside_address() const noexcept { return outside_; }
  /// The namespace's own address.
  const std::string& inside_address() const noexcept { return inside_; }

  /// Takes the link down (packets both ways are dropped) or brings it back.
  void cut();
  void restore();

  /// The program and arguments that run `program args...` inside the namespace.
  std::pair<std::string, std::vector<std::string>>
  command(const std::string& program, const std::vector<std::string>& args) const;

private:
  std::string name_;
  std::string outside_link_;
  std::string outside_;
  std::string inside_;
};

} // namespace troupe::testkit
