// A private PostgreSQL cluster in a folder of its own: initdb on first use, a unix socket in
// that folder (no TCP, so no port can clash), started and stopped with pg_ctl. Used by the test
// suites (one cluster per test run), by the demo (`.troupe/pg`) and by the benchmarks. When
// running as root, the server runs as the `postgres` user, which owns the data folder.
#pragma once

#include <string>
#include <vector>

namespace troupe::testkit {

class local_postgres {
public:
  struct options {
    /// The folder holding data/, the socket and the server log. Created when missing.
    std::string dir;
    /// Names the socket file only (no TCP listener).
    int port = 5432;
    /// Extra server settings, as "-c name=value" words for pg_ctl -o.
    std::string server_options;
    /// Lines added to pg_hba.conf when missing (a TCP listener's clients, say).
    std::vector<std::string> hba_lines;
  };

  /// Starts the cluster (creating it first when the folder has none); returns once it accepts
  /// connections. A cluster already running in the folder is reused. Throws
  /// troupe::error(connection_lost) with the server log's tail when it cannot start.
  static local_postgres start(options opts);

  /// Connection string: host=<dir> port=<port> user=postgres dbname=postgres.
  std::string dsn() const;
  const std::string& dir() const noexcept { return opts_.dir; }

  /// Stops the server (fast shutdown). Safe to call twice.
  void stop();
  /// Restarts the server (immediate stop, then start): sessions are cut as in a crash.
  void restart();
  /// Stops the server at once (immediate: as in a crash); start_again() brings it back.
  void stop_immediately();
  void start_again() { start_server(); }

  /// Stops the clusters in folders of the temporary directory named `prefix` + PID + anything,
  /// whose test process PID is gone (it crashed or was killed before it could stop them), and
  /// removes the folders.
  static void stop_leftovers(const std::string& prefix);

  /// Runs a shell command as the server's user (postgres when root). Returns the exit status.
  static int run_as_server_user(const std::string& command);

private:
  explicit local_postgres(options opts) : opts_(std::move(opts)) {}
  void start_server();
  options opts_;
};

/// The folder of the newest PostgreSQL server binaries installed (initdb, pg_ctl, postgres).
std::string postgres_bin_dir();

} // namespace troupe::testkit
