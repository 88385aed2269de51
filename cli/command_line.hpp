// The `troupe` command line: global options before the verb, then the verb and its options,
// parsed and validated into one plain struct before anything touches the database. Plain C++,
// no CAF.
#pragma once

#include "troupe/admin_records.hpp"
#include "troupe/area.hpp"
#include "troupe/schedule_records.hpp"
#include "troupe/state_records.hpp"

#include <chrono>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace troupe::cli {

/// A wrong command line (unknown verb or option, missing or bad value): exit status 2.
class usage_error : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

/// What the user asked for.
enum class verb {
  help,             ///< print the usage text
  version,          ///< print Troupe's version
  init,             ///< create the area (apply every migration)
  upgrade,          ///< apply the migrations an initialized area lacks
  sql_init,         ///< print the SQL that creates the area
  sql_upgrade,      ///< print the SQL that upgrades the area from `from_version`
  sql_grants,       ///< print the GRANTs of `roles`
  stats,            ///< per-queue counts
  pause,            ///< pause `target` (a queue)
  resume,           ///< resume `target` (a queue)
  queue_status,     ///< whether `target` (or every known queue) is paused
  cancel,           ///< cancel `target` (a message id), or what `filter` matches
  cancel_status,    ///< `target`'s state and whether its cancel was requested
  failed_list,      ///< a page of failed messages
  failed_show,      ///< one failed message (`payload`: with its arguments and options)
  retry,            ///< retry failed message `target`, or what `filter` matches
  purge,            ///< delete finished rows older than `older_than` (`filter.states`)
  recover,          ///< put back the messages of dead nodes now
  flush,            ///< delete the queued messages of `filter.queue` (`yes` given)
  states,           ///< `target`'s state, or a page (or the count) of what `states` matches
  history_list,     ///< a page of `target`'s attempts after `after_attempt`
  history_purge,    ///< delete attempt records older than `max_age`
  history_on,       ///< turn the area's attempt history on
  history_off,      ///< turn it off
  history_status,   ///< whether it is on
  schedule_create,  ///< create `schedule`
  schedule_list,    ///< every schedule, without arguments
  schedule_show,    ///< schedule `target` with its arguments and `runs` next runs
  schedule_enable,  ///< enable schedule `target`
  schedule_disable, ///< disable schedule `target`
  schedule_delete,  ///< delete schedule `target`
  scheduler,        ///< publish the area's due occurrences: once, or every `poll`
  exporter,         ///< serve the area's queue metrics on `listen`
  dashboard,        ///< serve the area's web dashboard on `listen`
};

/// One parsed and validated command line.
struct command_line {
  verb what = verb::help;
  /// libpq connection string or URI; empty means libpq's PG* environment variables.
  std::string dsn;
  /// The area, already validated.
  area where;
  /// `--json` of init, upgrade and stats.
  bool json = false;
  /// `--queue` of stats, already validated.
  std::optional<std::string> queue;
  /// `--recount` of stats.
  bool recount = false;
  /// `--from` of `sql upgrade`.
  int from_version = 0;
  /// `--producer`, `--node`, `--operator` of `sql grants`.
  area_roles roles;
  /// The queue or message id the verb names (pause, cancel, ...); empty when it names none.
  std::string target;
  /// `--queue`, `--task`, `--state` of cancel, retry and failed list (validated).
  message_filter filter;
  /// `--limit` and `--after` of failed list.
  std::int32_t limit = 50;
  std::optional<std::string> after;
  /// `--payload` of failed show.
  bool payload = false;
  /// `--older-than` of purge (a PostgreSQL interval).
  std::string older_than = "30 days";
  /// `--yes` of flush.
  bool yes = false;
  /// The filter, sort and page of `states` (`states.payload`: --payload), and its `--count`.
  state_query states;
  bool count = false;
  /// `--after` of history list (an attempt id), `--max-age` of history purge.
  std::optional<std::int64_t> after_attempt;
  std::string max_age;
  /// The schedule of `schedule create`, and how many next runs `schedule show` lists (--runs).
  schedule_spec schedule;
  int runs = 5;
  /// `troupe scheduler`: --once, --poll and --batch. `troupe dashboard`: --sample, in poll.
  bool once = false;
  std::chrono::milliseconds poll{1000};
  std::int32_t batch = 100;
  /// `troupe exporter`: where it listens (--listen HOST:PORT) and the queues it reports
  /// (--queue, repeatable; empty: every queue with messages or a pause record).
  std::string listen_host = "127.0.0.1";
  std::int32_t listen_port = 9480;
  std::vector<std::string> queues;
  /// `troupe dashboard`: --read-only, and --token-file (the actions' token is read from this
  /// file, else from $TROUPE_DASHBOARD_TOKEN).
  bool read_only = false;
  std::string token_file;
};

/// Parses `args` (argv without the program name). `env_dsn` is $TROUPE_DSN, or nullptr when it
/// is unset. Throws usage_error naming the offending option or value.
command_line parse_command_line(const std::vector<std::string_view>& args, const char* env_dsn);

} // namespace troupe::cli
