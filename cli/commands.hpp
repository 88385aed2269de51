// The verbs of the `troupe` command. Each opens its own connection when it needs one, writes
// its report to `out`, and throws troupe::error (exit status 1) when the database or the area
// is not as it needs to be.
#pragma once

#include "cli/command_line.hpp"
#include "troupe/admin.hpp"

#include <ostream>

namespace troupe::cli {

/// The admin API on the command line's area. Server warnings go to stderr; notices (every
/// idempotent migration step says one, "schema already exists, skipping") are dropped.
admin open_admin(const command_line& cl);

/// `troupe init`: applies every migration the area lacks (creating it when absent).
void run_init(const command_line& cl, std::ostream& out);

/// `troupe upgrade`: the same migrations, refused when the area was never initialized.
void run_upgrade(const command_line& cl, std::ostream& out);

/// `troupe sql init` / `troupe sql upgrade --from N`: prints the migration SQL; no connection.
void run_sql(const command_line& cl, std::ostream& out);

/// `troupe stats`: per-queue counts, ready, scheduled and the age of the oldest ready message.
void run_stats(const command_line& cl, std::ostream& out);

/// The operations' verbs (cli/operations.cpp): pause, resume, queue-status, cancel,
/// cancel-status, failed list, failed show, retry, on admin `a` (the command line's area, or the
/// dashboard's). Each prints one JSON object and returns the
/// exit status: 1 when the message is missing or the operation was refused (the reason on
/// `err`).
int run_operation(admin& a, const command_line& cl, std::ostream& out, std::ostream& err);

/// `troupe states` (cli/states_command.cpp): one message's state, a page of states or their
/// count, as JSON. Returns 1 when the message asked for is missing.
int run_states(admin& a, const command_line& cl, std::ostream& out, std::ostream& err);

/// `troupe history list|purge|enable|disable|status` (cli/history_command.cpp), as JSON.
int run_history(admin& a, const command_line& cl, std::ostream& out);

/// `troupe schedule create|list|show|enable|disable|delete` (cli/schedule_command.cpp), as
/// JSON. Returns 1 when the schedule named is missing.
int run_schedule(admin& a, const command_line& cl, std::ostream& out, std::ostream& err);

/// `troupe scheduler`: one tick (--once, its occurrences as JSON), or ticks until SIGTERM or
/// SIGINT, one JSON line per occurrence.
int run_scheduler(const command_line& cl, std::ostream& out);

/// `troupe exporter` (cli/exporter_command.cpp): serves the area's queue metrics on /metrics
/// until SIGTERM or SIGINT; one JSON line when it listens, one when it stops.
int run_exporter(const command_line& cl, std::ostream& out);

/// `troupe dashboard` (dashboard/): serves the area's web dashboard on `listen` until SIGTERM
/// or SIGINT; one JSON line when it listens, one when it stops.
int run_dashboard(const command_line& cl, std::ostream& out);

} // namespace troupe::cli
