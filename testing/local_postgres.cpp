#include "local_postgres.hpp"

#include "troupe/error.hpp"

#include <fmt/format.h>
#include <pwd.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>

namespace troupe::testkit {

namespace fs = std::filesystem;

namespace {

std::string shell_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'')
      out += "'\\''";
    else
      out.push_back(c);
  }
  return out + "'";
}

std::string tail_of(const fs::path& file, std::size_t max_chars = 2000) {
  std::ifstream in(file);
  std::stringstream ss;
  ss << in.rdbuf();
  auto s = ss.str();
  return s.size() > max_chars ? s.substr(s.size() - max_chars) : s;
}

} // namespace

std::string postgres_bin_dir() {
  if (const char* env = std::getenv("TROUPE_PG_BINDIR"))
    return env;
  fs::path best;
  int best_version = 0;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator("/usr/lib/postgresql", ec)) {
    int v = std::atoi(entry.path().filename().c_str());
    if (v > best_version && fs::exists(entry.path() / "bin" / "initdb")) {
      best_version = v;
      best = entry.path() / "bin";
    }
  }
  if (best.empty())
    throw error(errc::not_found, "no PostgreSQL server found under /usr/lib/postgresql "
                                 "(apt-get install postgresql-15, or set TROUPE_PG_BINDIR)");
  return best.string();
}

int local_postgres::run_as_server_user(const std::string& command) {
  std::string full = geteuid() == 0 ? "runuser -u postgres -- sh -c " + shell_quote(command)
                                    : "sh -c " + shell_quote(command);
  int status = std::system(full.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

local_postgres local_postgres::start(options opts) {
  fs::path dir = fs::absolute(opts.dir);
  fs::create_directories(dir);
  opts.dir = dir.string();
  if (geteuid() == 0) {
    // initdb and postgres refuse to run as root: hand the folder to the postgres user, who
    // must also be able to reach it through its parent folders.
    std::system(fmt::format("chown postgres: {}", shell_quote(opts.dir)).c_str());
    if (run_as_server_user(
          fmt::format("test -w {} -a -x {}", shell_quote(opts.dir), shell_quote(opts.dir))) != 0)
      throw error(errc::invalid_argument,
                  "the postgres user cannot reach " + opts.dir +
                    " (a parent folder is closed to it); choose a folder under /tmp");
  }
  auto bin = postgres_bin_dir();
  if (!fs::exists(dir / "data" / "PG_VERSION")) {
    auto cmd =
      fmt::format("{}/initdb -D {} -A trust -U postgres --no-sync -E UTF8 >{} 2>&1", bin,
                  shell_quote((dir / "data").string()), shell_quote((dir / "initdb.log").string()));
    if (run_as_server_user(cmd) != 0)
      throw error(errc::connection_lost,
                  "initdb failed in " + opts.dir + ":\n" + tail_of(dir / "initdb.log"));
  }
  if (!opts.hba_lines.empty()) {
    auto hba = dir / "data" / "pg_hba.conf";
    std::string text;
    {
      std::ifstream in(hba);
      text.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    }
    std::ofstream out(hba, std::ios::app);
    for (const auto& line : opts.hba_lines)
      if (text.find(line) == std::string::npos)
        out << line << "\n";
  }
  local_postgres pg(std::move(opts));
  pg.start_server();
  return pg;
}

void local_postgres::start_server() {
  auto bin = postgres_bin_dir();
  fs::path dir = opts_.dir;
  auto data = shell_quote((dir / "data").string());
  if (run_as_server_user(fmt::format("{}/pg_ctl -D {} status >/dev/null 2>&1", bin, data)) == 0)
    return; // already running
  auto server = fmt::format("-c listen_addresses='' -c unix_socket_directories={} -p {} {}",
                            opts_.dir, opts_.port, opts_.server_options);
  auto cmd = fmt::format("{}/pg_ctl -D {} -l {} -o {} -w -t 60 start >/dev/null 2>&1", bin, data,
                         shell_quote((dir / "server.log").string()), shell_quote(server));
  if (run_as_server_user(cmd) != 0)
    throw error(errc::connection_lost,
                "PostgreSQL did not start in " + opts_.dir + ":\n" + tail_of(dir / "server.log"));
}

std::string local_postgres::dsn() const {
  return fmt::format("host={} port={} user=postgres dbname=postgres", opts_.dir, opts_.port);
}

void local_postgres::stop() {
  auto bin = postgres_bin_dir();
  auto data = shell_quote((fs::path(opts_.dir) / "data").string());
  run_as_server_user(fmt::format("{}/pg_ctl -D {} -m fast -w stop >/dev/null 2>&1", bin, data));
}

void local_postgres::restart() {
  stop_immediately();
  start_server();
}

void local_postgres::stop_leftovers(const std::string& prefix) {
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(fs::temp_directory_path(), ec)) {
    auto name = entry.path().filename().string();
    if (name.rfind(prefix, 0) != 0)
      continue;
    auto pid = std::atol(name.c_str() + prefix.size());
    if (pid <= 0 || ::kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM)
      continue;
    // Only a folder a test run made: owned by this user or the server's, and writable by no one
    // else (the temporary directory is everyone's).
    struct stat st {};
    const passwd* server_user = ::getpwnam("postgres");
    if (::stat(entry.path().c_str(), &st) != 0 || !S_ISDIR(st.st_mode) ||
        (st.st_mode & (S_IWGRP | S_IWOTH)) != 0 ||
        (st.st_uid != ::geteuid() && (!server_user || st.st_uid != server_user->pw_uid)))
      continue;
    if (fs::exists(entry.path() / "data" / "PG_VERSION", ec))
      run_as_server_user(fmt::format("{}/pg_ctl -D {} -m immediate -w stop >/dev/null 2>&1",
                                     postgres_bin_dir(),
                                     shell_quote((entry.path() / "data").string())));
    fs::remove_all(entry.path(), ec);
  }
}

void local_postgres::stop_immediately() {
  auto bin = postgres_bin_dir();
  auto data = shell_quote((fs::path(opts_.dir) / "data").string());
  run_as_server_user(
    fmt::format("{}/pg_ctl -D {} -m immediate -w stop >/dev/null 2>&1", bin, data));
}

} // namespace troupe::testkit
