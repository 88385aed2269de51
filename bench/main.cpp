// troupe-bench: Troupe's benchmark scenarios against one PostgreSQL server. Without a DSN (no
// --dsn, no TROUPE_DSN) it starts a private cluster in .troupe/bench-pg (default durability)
// and stops it at the end. docs/performance.md explains every scenario and figure.
//
//   build/bin/troupe-bench [SCENARIO...|all] [--dsn DSN] [--json] [--quick] [--tasks N]
//                          [--concurrency N] [--prefetch N] [--storage-connections N]
//                          [--scheduler-threads N]
//                          [--rate N] [--duration S] [--explain] [--attempt-history]
//   build/bin/troupe-bench node --dsn DSN --schema S [--concurrency N] [--prefetch N]
//                               [--scheduler-threads N]
#include "local_postgres.hpp"
#include "scenarios.hpp"

#include <troupe/error.hpp>
#include <troupe/log.hpp>

#include <fmt/format.h>

#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <map>
#include <optional>
#include <stdexcept>

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

namespace {

using namespace troupe::bench;
using troupe::errc;
using troupe::error;

using scenario_fn = scenario_result (*)(bench_context&);

/// Every scenario, in the order `all` runs them (sustained after burn-down: it runs at half the
/// burn-down rate).
const std::vector<std::pair<std::string, scenario_fn>>& scenarios() {
  static const std::vector<std::pair<std::string, scenario_fn>> all = {
    {"enqueue-single", run_enqueue_single},
    {"enqueue-batch", run_enqueue_batch},
    {"enqueue-tx", run_enqueue_tx},
    {"burn-down", run_burn_down},
    {"mixed", run_mixed},
    {"sustained", run_sustained},
    {"memory", run_memory},
    {"memory-large", run_memory_large},
    {"claim-vs-history", run_claim_vs_history},
    {"states-vs-history", run_states_vs_history},
    {"limits", run_limits},
    {"pipeline", run_pipeline},
    {"group", run_group},
    {"exporter", run_exporter_scrape},
    {"metrics", run_metrics_overhead},
  };
  return all;
}

std::string scenario_names() {
  std::string out;
  for (const auto& [name, fn] : scenarios())
    out += (out.empty() ? "" : ", ") + name;
  return out;
}

constexpr const char* usage =
  "usage: troupe-bench [SCENARIO...|all] [--dsn DSN] [--json] [--quick] [--tasks N]\n"
  "                    [--concurrency N] [--prefetch N] [--storage-connections N]\n"
  "                    [--scheduler-threads N]\n"
  "                    [--rate PER_SECOND] [--duration SECONDS] [--explain]\n"
  "                    [--attempt-history]\n"
  "       troupe-bench node --dsn DSN --schema SCHEMA [--concurrency N] [--prefetch N]\n"
  "                         [--scheduler-threads N]\n"
  "scenarios: ";

/// A whole number in [lo, hi] for flag `flag`, or invalid_argument naming both.
std::int64_t parse_integer(const std::string& flag, const std::string& text, std::int64_t lo,
                           std::int64_t hi) {
  std::int64_t v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || v < lo || v > hi)
    throw error(
      errc::invalid_argument,
      fmt::format("{} must be a whole number from {} to {}, got \"{}\"", flag, lo, hi, text));
  return v;
}

double parse_positive(const std::string& flag, const std::string& text, double hi) {
  char* end = nullptr;
  double v = std::strtod(text.c_str(), &end);
  if (text.empty() || end != text.c_str() + text.size() || !(v > 0) || v > hi)
    throw error(
      errc::invalid_argument,
      fmt::format("{} must be a number above 0 and at most {}, got \"{}\"", flag, hi, text));
  return v;
}

struct command_line {
  bench_options options;
  std::vector<std::string> scenarios;
  bool help = false;
  // node subcommand
  bool node = false;
  std::string schema;
};

command_line parse(int argc, char** argv) {
  command_line cl;
  if (const char* env = std::getenv("TROUPE_DSN"))
    cl.options.dsn = env;
  int i = 1;
  if (argc > 1 && std::string_view(argv[1]) == "node") {
    cl.node = true;
    ++i;
  }
  for (; i < argc; ++i) {
    std::string arg = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc)
        throw error(errc::invalid_argument, arg + " needs a value");
      return argv[++i];
    };
    auto& o = cl.options;
    if (arg == "--help" || arg == "-h")
      cl.help = true;
    else if (arg == "--dsn")
      o.dsn = value();
    else if (arg == "--json" && !cl.node)
      o.json = true;
    else if (arg == "--quick" && !cl.node)
      o.quick = true;
    else if (arg == "--explain" && !cl.node)
      o.explain = true;
    else if (arg == "--attempt-history" && !cl.node)
      o.attempt_history = true;
    else if (arg == "--tasks" && !cl.node)
      o.tasks = parse_integer(arg, value(), 1, 100'000'000);
    else if (arg == "--concurrency")
      o.concurrency = static_cast<std::int32_t>(parse_integer(arg, value(), 1, 1024));
    else if (arg == "--prefetch")
      o.prefetch = static_cast<std::int32_t>(parse_integer(arg, value(), 0, 65535));
    else if (arg == "--storage-connections" && !cl.node)
      o.storage_connections = static_cast<std::int32_t>(parse_integer(arg, value(), 1, 64));
    else if (arg == "--scheduler-threads")
      o.scheduler_threads = static_cast<std::int32_t>(parse_integer(arg, value(), 1, 64));
    else if (arg == "--rate" && !cl.node)
      o.rate = parse_positive(arg, value(), 10'000'000);
    else if (arg == "--duration" && !cl.node)
      o.duration = parse_positive(arg, value(), 3600);
    else if (arg == "--schema" && cl.node)
      cl.schema = value();
    else if (!arg.empty() && arg[0] == '-')
      throw error(errc::invalid_argument, "unknown option " + arg + " (see --help)");
    else if (cl.node)
      throw error(errc::invalid_argument, "troupe-bench node takes no argument \"" + arg + "\"");
    else if (arg == "all") {
      for (const auto& [name, fn] : scenarios())
        cl.scenarios.push_back(name);
    } else {
      bool known = false;
      for (const auto& [name, fn] : scenarios())
        known = known || name == arg;
      if (!known)
        throw error(errc::invalid_argument,
                    "unknown scenario \"" + arg + "\" (known: " + scenario_names() + ", all)");
      cl.scenarios.push_back(arg);
    }
  }
  if (cl.node && (cl.options.dsn.empty() || cl.schema.empty()))
    throw error(errc::invalid_argument, "troupe-bench node needs --dsn and --schema");
  if (!cl.node && cl.scenarios.empty())
    for (const auto& [name, fn] : scenarios())
      cl.scenarios.push_back(name);
  return cl;
}

std::string self_path() {
  std::error_code ec;
  auto p = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string("troupe-bench") : p.string();
}

/// The server's version and the settings that shape the figures.
scenario_result server_settings(bench_context& ctx) {
  scenario_result r{"server"};
  auto conn = ctx.connect("troupe-bench");
  r.set("version", conn.exec("SHOW server_version").text(0, 0));
  for (const char* name :
       {"fsync", "synchronous_commit", "full_page_writes", "wal_level", "shared_buffers",
        "max_connections", "max_wal_size", "checkpoint_timeout", "work_mem", "autovacuum"})
    r.set(name, conn.exec(fmt::format("SHOW {}", name)).text(0, 0));
  r.set("cpus", static_cast<std::int64_t>(::sysconf(_SC_NPROCESSORS_ONLN)));
  return r;
}

std::string summary_table(const std::vector<scenario_result>& results) {
  auto num = [](const std::optional<double>& v, int d) {
    return v ? fmt::format("{:.{}f}", *v, d) : std::string("-");
  };
  std::string out = fmt::format("{:<18} {:>10} {:>9} {:>11} {:>9} {:>9} {:>9}\n", "scenario",
                                "tasks", "seconds", "per second", "p50 ms", "p99 ms", "peak MB");
  for (const auto& r : results)
    out +=
      fmt::format("{:<18} {:>10} {:>9} {:>11} {:>9} {:>9} {:>9}\n", r.scenario,
                  r.tasks ? std::to_string(*r.tasks) : std::string("-"), num(r.seconds, 2),
                  num(r.per_second, 0), num(r.p50_ms, 3), num(r.p99_ms, 3), num(r.peak_rss_mb, 1));
  return out;
}

// Takes an exclusive lock on `dir`.lock for the rest of the process: a second troupe-bench
// without --dsn would otherwise share the private cluster, and the first to finish would stop
// it under the other.
void lock_private_cluster(const std::string& dir) {
  std::filesystem::create_directories(std::filesystem::path(dir).parent_path());
  auto path = dir + ".lock";
  int fd = ::open(path.c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0644);
  if (fd < 0)
    throw error(errc::bug, fmt::format("cannot open {}: {}", path, std::strerror(errno)));
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0)
    throw std::runtime_error(
      fmt::format("another troupe-bench is using the private cluster in {} (it holds {}); wait "
                  "for it, or pass --dsn",
                  dir, path));
  // The descriptor stays open: the lock ends with the process.
}

int run(command_line cl) {
  std::optional<troupe::testkit::local_postgres> private_pg;
  auto& out = std::cout;
  try {
    if (cl.options.dsn.empty()) {
      // The limit scripts' server settings (bench/README), so figures compare.
      troupe::testkit::local_postgres::options pg{
        ".troupe/bench-pg", 5432,
        "-c shared_buffers=1GB -c max_wal_size=4GB -c checkpoint_timeout=15min "
        "-c max_connections=200"};
      lock_private_cluster(pg.dir);
      std::cerr << "starting a private PostgreSQL cluster in " << pg.dir << std::endl;
      try {
        private_pg = troupe::testkit::local_postgres::start(pg);
      } catch (const error& e) {
        if (e.code() != errc::invalid_argument)
          throw;
        pg.dir = "/tmp/troupe-bench-pg-" + std::to_string(::getuid());
        std::cerr << e.what() << "; using " << pg.dir << " instead" << std::endl;
        lock_private_cluster(pg.dir);
        private_pg = troupe::testkit::local_postgres::start(pg);
      }
      cl.options.dsn = private_pg->dsn();
    }
    bench_context ctx(cl.options, self_path());
    auto server = server_settings(ctx);
    if (cl.options.json) {
      out << to_json_line(server) << std::endl;
    } else {
      out << "PostgreSQL " << server.setting("version") << ":";
      for (const auto& [k, v] : server.settings)
        if (k != "version")
          out << " " << k << "=" << v;
      out << "\n" << std::endl;
    }
    std::vector<scenario_result> results;
    for (const auto& name : cl.scenarios) {
      for (const auto& [known, fn] : scenarios()) {
        if (known != name)
          continue;
        if (!cl.options.json)
          std::cerr << "running " << name << std::endl;
        auto r = fn(ctx);
        if (cl.options.json)
          out << to_json_line(r) << std::endl;
        else
          out << to_human(r) << std::endl;
        results.push_back(std::move(r));
      }
    }
    if (!cl.options.json && results.size() > 1)
      out << summary_table(results) << std::flush;
    if (private_pg)
      private_pg->stop();
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "troupe-bench: " << e.what() << std::endl;
    if (private_pg)
      private_pg->stop();
    return 1;
  }
}

} // namespace

int main(int argc, char** argv) {
  command_line cl;
  try {
    cl = parse(argc, argv);
  } catch (const error& e) {
    std::cerr << "troupe-bench: " << e.what() << std::endl;
    return 2;
  }
  if (cl.help) {
    std::cout << usage << scenario_names() << "\n";
    return 0;
  }
  troupe::configure_logging("warn", "text");
  if (cl.node) {
    try {
      return run_node_command(cl.options, cl.schema);
    } catch (const std::exception& e) {
      std::cerr << "troupe-bench node: " << e.what() << std::endl;
      return 1;
    }
  }
  return run(std::move(cl));
}
