// A proxy in front of the test cluster's Unix socket, for fault tests that cut a node's
// connections without killing its process: it can refuse new connections (each is accepted and
// closed at once, as a firewall that resets them would) while the ones it carries keep flowing,
// and it can close every connection it carries.
#pragma once

#include <atomic>
#include <cstddef>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace troupe::testkit {

class socket_proxy {
public:
  /// Listens at `dir`/.s.PGSQL.`port` (a fresh directory) and forwards every connection to the
  /// server socket `target_dir`/.s.PGSQL.`port`.
  socket_proxy(std::string target_dir, int port);
  ~socket_proxy();
  socket_proxy(const socket_proxy&) = delete;
  socket_proxy& operator=(const socket_proxy&) = delete;

  /// `dsn` with its host replaced by the proxy's directory.
  std::string dsn(const std::string& dsn) const;
  /// While set, new connections are closed as soon as they are accepted.
  void refuse_new(bool refuse) { refusing_ = refuse; }
  /// Closes every connection the proxy carries now.
  void cut_all();
  /// Connections accepted and closed at once while refusing.
  std::size_t refused() const { return refused_count_; }

private:
  struct pair {
    int client = -1;
    int server = -1;
  };
  void run();

  std::string dir_;
  std::string target_;
  int port_;
  int listen_fd_ = -1;
  int wake_[2] = {-1, -1};
  std::atomic<bool> refusing_{false};
  std::atomic<bool> cut_{false};
  std::atomic<bool> done_{false};
  std::atomic<std::size_t> refused_count_{0};
  std::vector<pair> pairs_; // the proxy thread's own
  std::thread thread_;
};

} // namespace troupe::testkit
