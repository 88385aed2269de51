// `troupe`: create, upgrade and inspect a Troupe area from the shell. Plain C++ over the admin
// API (no CAF). Exit status: 0 success, 1 runtime or database error, 2 usage error.

#include "cli/command_line.hpp"
#include "cli/commands.hpp"
#include "cli/output.hpp"
#include "troupe/version.hpp"

#include <cstdlib>
#include <exception>
#include <iostream>
#include <string_view>
#include <vector>

namespace {

constexpr int exit_ok = 0;
constexpr int exit_failure = 1;
constexpr int exit_usage = 2;

constexpr std::string_view usage_text = R"(usage: troupe [GLOBAL OPTIONS] VERB [OPTIONS]

Create, upgrade and inspect a Troupe area (a PostgreSQL schema and table prefix).

Verbs:
  init [--json]               create the area, or apply the migrations it lacks
  upgrade [--json]            apply the migrations an initialized area lacks
  sql init                    print the SQL that creates the area (no connection)
  sql upgrade --from N        print the SQL that upgrades the area from version N
                              (no connection)
  sql grants [--producer R] [--node R] [--operator R]
                              print the least-privilege GRANTs of these roles
                              (no connection)
  stats [--json] [--queue Q] [--recount]
                              per-queue message counts by state, ready, scheduled and
                              the age of the oldest ready message; --recount first
                              rebuilds the finished counts from the rows
  pause Q, resume Q           pause or resume queue Q (persistent, idempotent)
  queue-status [Q]            whether Q (or every known queue) is paused
  cancel ID                   cancel a message: queued now, running by request
  cancel [--queue Q] [--task T] [--state queued|running]...
                              cancel every message that matches
  cancel-status ID            a message's state and whether its cancel was requested
  failed list [--queue Q] [--task T] [--limit N] [--after ID]
                              failed messages in id order, N per page (default 50,
                              at most 1000); --after takes the last page's next_after
  failed show ID [--payload]  one failed message; --payload adds arguments and options
  retry ID                    run a failed message again, with a fresh retry budget
  retry [--queue Q] [--task T]
                              retry every failed message that matches
  purge [--older-than I] [--state done|failed|cancelled]...
                              delete finished rows older than the PostgreSQL
                              interval I (default '30 days'), all three states
                              by default
  recover                     put back the messages of dead nodes now
  flush --queue Q --yes       delete every queued message of queue Q
  states ID [--payload]       one message's state record
  states [FILTERS] [--sort COL] [--asc|--desc] [--limit N] [--after CURSOR |
         --offset N] [--payload] [--count]
                              a page of state records (default: newest first, 50),
                              or with --count how many match; FILTERS are
                              --status S, --task T, --queue Q, --id ID,
                              --composition ID (each may repeat),
                              --enqueued-from/--enqueued-to TIME and
                              --finished-from/--finished-to TIME
  history enable|disable|status
                              turn the area's attempt history on or off, or show it
  history list ID [--after N] [--limit N]
                              a message's attempts (one per started execution)
  history purge --max-age I   delete attempt records that started more than the
                              PostgreSQL interval I ago
  schedule create NAME --task T (--every D | --cron EXPR [--time-zone TZ])
         [--queue Q] [--args JSON] [--options JSON] [--priority N] [--start-at TIME]
         [--overlap allow|skip] [--catch-up coalesce|none] [--jitter D] [--disabled]
                              create a schedule (D: 500ms, 90s, 5min, 2h, 1d; TIME:
                              ISO-8601 with its offset)
  schedule list               every schedule, without arguments
  schedule show NAME [--runs N]
                              one schedule with its arguments and next N runs
  schedule enable|disable|delete NAME
                              enable, disable or delete a schedule
  scheduler [--once] [--poll D] [--batch N]
                              publish the due occurrences every D (default 1s) until
                              SIGTERM or SIGINT, or once (--once) with a report
  exporter [--listen HOST:PORT] [--queue Q]...
                              serve the area's queue metrics for Prometheus on
                              http://HOST:PORT/metrics (default 127.0.0.1:9480)
                              until SIGTERM or SIGINT; --queue selects queues
  dashboard [--listen HOST:PORT] [--token-file F] [--read-only] [--sample D]
                              serve the area's web dashboard on http://HOST:PORT/
                              (default 127.0.0.1:9481) until SIGTERM or SIGINT; its
                              actions need the token of file F or of
                              $TROUPE_DASHBOARD_TOKEN, and are refused without one;
                              queue counts are sampled every D (default 5s) for the
                              throughput chart
  help                        print this help
  version                     print Troupe's version

Global options (before the verb):
  --dsn DSN      libpq connection string or URI (default: $TROUPE_DSN, else
                 libpq's PG* environment variables)
  --schema NAME  schema of the area (default: troupe)
  --prefix P     table name prefix of the area (default: empty)
  -h, --help     print this help
  --version      print Troupe's version

Options take their value as "--opt VALUE" or "--opt=VALUE". The operations (pause to
states) print one JSON object; a message id that is missing, or a retry refused, exits 1.
Exit status: 0 success, 1 runtime or database error, 2 usage error.
)";

/// Prints `troupe: <message>`. Messages hold no password: the storage layer redacts the DSN in
/// its errors, and the command line parser redacts what it echoes and refuses a malformed DSN
/// before libpq can quote pieces of it.
void report(std::string_view message) {
  std::cerr << "troupe: " << troupe::cli::terminal_safe(message) << '\n';
}

bool is_schedule(troupe::cli::verb v) {
  using troupe::cli::verb;
  return v == verb::schedule_create || v == verb::schedule_list || v == verb::schedule_show ||
         v == verb::schedule_enable || v == verb::schedule_disable || v == verb::schedule_delete;
}

bool is_history(troupe::cli::verb v) {
  using troupe::cli::verb;
  return v == verb::history_list || v == verb::history_purge || v == verb::history_on ||
         v == verb::history_off || v == verb::history_status;
}

int run(const troupe::cli::command_line& cl) {
  using troupe::cli::verb;
  switch (cl.what) {
  case verb::help:
    std::cout << usage_text;
    break;
  case verb::version:
    std::cout << "troupe " << troupe::version_string << '\n';
    break;
  case verb::init:
    troupe::cli::run_init(cl, std::cout);
    break;
  case verb::upgrade:
    troupe::cli::run_upgrade(cl, std::cout);
    break;
  case verb::sql_init:
  case verb::sql_upgrade:
  case verb::sql_grants:
    troupe::cli::run_sql(cl, std::cout);
    break;
  case verb::stats:
    troupe::cli::run_stats(cl, std::cout);
    break;
  default: {
    auto a = troupe::cli::open_admin(cl); // connects on first use
    auto status = cl.what == verb::states ? troupe::cli::run_states(a, cl, std::cout, std::cerr)
                  : is_history(cl.what)   ? troupe::cli::run_history(a, cl, std::cout)
                  : is_schedule(cl.what)  ? troupe::cli::run_schedule(a, cl, std::cout, std::cerr)
                  : cl.what == verb::scheduler ? troupe::cli::run_scheduler(cl, std::cout)
                  : cl.what == verb::exporter  ? troupe::cli::run_exporter(cl, std::cout)
                  : cl.what == verb::dashboard
                    ? troupe::cli::run_dashboard(cl, std::cout)
                    : troupe::cli::run_operation(a, cl, std::cout, std::cerr);
    if (!std::cout.flush()) {
      report("cannot write to standard output");
      return exit_failure;
    }
    return status;
  }
  }
  if (!std::cout.flush()) {
    report("cannot write to standard output");
    return exit_failure;
  }
  return exit_ok;
}

} // namespace

int main(int argc, char** argv) {
  std::vector<std::string_view> args(argv + (argc > 0 ? 1 : 0), argv + argc);
  troupe::cli::command_line cl;
  try {
    cl = troupe::cli::parse_command_line(args, std::getenv("TROUPE_DSN"));
  } catch (const troupe::cli::usage_error& e) {
    report(e.what());
    std::cerr << "run 'troupe --help' for usage\n";
    return exit_usage;
  }
  try {
    return run(cl);
  } catch (const std::exception& e) {
    report(e.what());
    return exit_failure;
  }
}
