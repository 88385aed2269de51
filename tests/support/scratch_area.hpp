// Test kit for suites that need PostgreSQL: the run's cluster, one fresh schema per test case,
// bounded waits on conditions, and child worker processes for fault tests.
#pragma once

#include "storage/connection.hpp"
#include "storage/naming.hpp"
#include "storage/statements.hpp"
#include "troupe/area.hpp"

#include <chrono>
#include <functional>
#include <string>
#include <vector>

namespace troupe::testkit {

/// The DSN of this test run's cluster: TROUPE_TEST_DSN when set, else the cluster started by
/// `troupe-test-pg start DIR` (DIR from TROUPE_TEST_PGDIR), read from DIR/dsn.
std::string test_dsn();

/// A schema of its own for one test case, migrated to the latest version on construction and
/// dropped (with everything in it) on destruction.
class scratch_area {
public:
  scratch_area();
  ~scratch_area();
  scratch_area(const scratch_area&) = delete;
  scratch_area& operator=(const scratch_area&) = delete;

  const troupe::area& where() const noexcept { return area_; }
  const std::string& dsn() const noexcept { return dsn_; }
  const storage::statement_set& statements() const { return *stmts_; }
  storage::statement_set_ptr statements_ptr() const { return stmts_; }
  /// A connection for the test's own SQL (assertions, setup).
  storage::connection& sql() { return conn_; }
  /// The queue table's quoted name.
  std::string queue_table() const;
  /// A second area in this schema with table prefix `prefix`, made by the migrations up to
  /// `version` only (an area a node of an earlier release left): for upgrade tests.
  troupe::area older_area(const std::string& prefix, int version);
  /// The first column of the first row of `query` as an integer (0 when NULL).
  std::int64_t scalar(const std::string& query);
  /// The plan of `EXPLAIN query`, a line per row (statements prepared on sql() can be named
  /// with `EXECUTE`).
  std::string explain(const std::string& query);

private:
  troupe::area area_;
  std::string dsn_;
  storage::statement_set_ptr stmts_;
  storage::connection conn_;
};

/// The first column of the first row of `query` as an integer (0 when NULL), on a connection of
/// its own to `dsn`; -1 while the server cannot be reached or read (a fault test may have it
/// down).
std::int64_t scalar_at(const std::string& dsn, const std::string& query);

/// Polls `condition` every 20 ms until it holds or `limit` passed; returns whether it held.
bool wait_until(const std::function<bool()>& condition, std::chrono::milliseconds limit);

/// A child process (a worker node for fault tests). Killed with SIGKILL on destruction if it
/// still runs.
class child_process {
public:
  child_process(const std::string& program, const std::vector<std::string>& args);
  ~child_process();
  child_process(const child_process&) = delete;
  child_process& operator=(const child_process&) = delete;

  int pid() const noexcept { return pid_; }
  void signal(int sig);
  /// Waits up to `limit` for the process to end; returns its exit code, or -1 on timeout, or
  /// 128 + signal when a signal ended it.
  int wait(std::chrono::milliseconds limit);

private:
  int pid_ = -1;
  bool reaped_ = false;
  int status_ = 0;
};

/// build/bin/<name>, next to the running test binary.
std::string sibling_binary(const std::string& name);

} // namespace troupe::testkit
