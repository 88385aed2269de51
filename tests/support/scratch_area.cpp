#include "scratch_area.hpp"

#include "storage/embedded_sql.hpp"
#include "storage/migrations.hpp"
#include "troupe/error.hpp"

#include <fmt/format.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <thread>

namespace troupe::testkit {

namespace fs = std::filesystem;

std::string test_dsn() {
  if (const char* dsn = std::getenv("TROUPE_TEST_DSN"); dsn && *dsn)
    return dsn;
  const char* dir = std::getenv("TROUPE_TEST_PGDIR");
  if (!dir || !*dir)
    throw error(errc::not_found, "no test database: set TROUPE_TEST_DSN, or run through ctest "
                                 "(which starts a cluster and sets TROUPE_TEST_PGDIR)");
  std::ifstream in(fs::path(dir) / "dsn");
  std::string dsn;
  std::getline(in, dsn);
  if (dsn.empty())
    throw error(errc::not_found, fmt::format("no cluster DSN in {}/dsn", dir));
  return dsn;
}

namespace {

std::string fresh_schema_name() {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  return fmt::format("t_{:012x}", rng() & 0xffffffffffffull);
}

} // namespace

scratch_area::scratch_area()
    : area_{fresh_schema_name(), ""}, dsn_(test_dsn()), stmts_(storage::make_statement_set(area_)),
      conn_(storage::connection::open(dsn_, "troupe-test")) {
  storage::migrate(conn_, *stmts_);
}

scratch_area::~scratch_area() {
  try {
    if (!conn_.ok())
      conn_ = storage::connection::open(dsn_, "troupe-test");
    conn_.exec(
      fmt::format("DROP SCHEMA IF EXISTS {} CASCADE", storage::quote_identifier(area_.schema)));
  } catch (...) {
    // A test that broke the server leaves a schema behind in a throwaway cluster.
  }
}

std::string scratch_area::queue_table() const {
  return storage::quote_identifier(area_.schema) + "." +
         storage::quote_identifier(area_.prefix + "queue");
}

troupe::area scratch_area::older_area(const std::string& prefix, int version) {
  troupe::area old{area_.schema, prefix};
  auto stmts = storage::make_statement_set(old);
  conn_.run(stmts->get(storage::sql::create_versions_table), {});
  for (const auto& m : storage::embedded::migrations()) {
    if (m.number > version)
      continue;
    conn_.exec(storage::render_sql(m.text, old));
    conn_.run(stmts->get(storage::sql::record_version),
              {std::to_string(m.number), std::string(m.name)});
  }
  return old;
}

std::int64_t scratch_area::scalar(const std::string& query) {
  if (!conn_.ok())
    conn_ = storage::connection::open(dsn_, "troupe-test");
  auto res = conn_.exec(query, "test_query");
  if (res.rows() == 0 || res.is_null(0, 0))
    return 0;
  return res.int64(0, 0);
}

std::string scratch_area::explain(const std::string& query) {
  auto plan = conn_.exec("EXPLAIN " + query, "test_explain");
  std::string text;
  for (int r = 0; r < plan.rows(); ++r)
    text += std::string(plan.text(r, 0)) + "\n";
  return text;
}

std::int64_t scalar_at(const std::string& dsn, const std::string& query) {
  try {
    auto c = storage::connection::open(dsn, "troupe-test");
    auto r = c.exec(query);
    return r.is_null(0, 0) ? 0 : r.int64(0, 0);
  } catch (const std::exception&) {
    return -1;
  }
}

bool wait_until(const std::function<bool()>& condition, std::chrono::milliseconds limit) {
  auto deadline = std::chrono::steady_clock::now() + limit;
  for (;;) {
    if (condition())
      return true;
    if (std::chrono::steady_clock::now() >= deadline)
      return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

child_process::child_process(const std::string& program, const std::vector<std::string>& args) {
  std::vector<char*> argv;
  argv.push_back(const_cast<char*>(program.c_str()));
  for (const auto& a : args)
    argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  pid_ = ::fork();
  if (pid_ == 0) {
    // Die with the test process, so a crashed or timed-out test leaves no worker behind.
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    // Undo signal blocking the parent may have set up, so the child sees SIGTERM.
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    ::execv(program.c_str(), argv.data());
    std::_Exit(127);
  }
  if (pid_ < 0)
    throw error(errc::bug, "fork failed");
}

child_process::~child_process() {
  if (pid_ > 0 && !reaped_) {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, &status_, 0);
  }
}

void child_process::signal(int sig) {
  if (pid_ > 0 && !reaped_)
    ::kill(pid_, sig);
}

int child_process::wait(std::chrono::milliseconds limit) {
  auto deadline = std::chrono::steady_clock::now() + limit;
  while (!reaped_) {
    int r = ::waitpid(pid_, &status_, WNOHANG);
    if (r == pid_) {
      reaped_ = true;
      break;
    }
    if (std::chrono::steady_clock::now() >= deadline)
      return -1;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (WIFEXITED(status_))
    return WEXITSTATUS(status_);
  if (WIFSIGNALED(status_))
    return 128 + WTERMSIG(status_);
  return -1;
}

std::string sibling_binary(const std::string& name) {
  auto self = fs::read_symlink("/proc/self/exe");
  return (self.parent_path() / name).string();
}

} // namespace troupe::testkit
