#include "storage/operations.hpp"

#include "storage/array_columns.hpp"
#include "storage/coordination.hpp"
#include "storage/naming.hpp"
#include "storage/statements.hpp"
#include "troupe/error.hpp"

#include <fmt/format.h>

namespace troupe::storage {

namespace {

std::string bool_text(bool b) {
  return b ? "true" : "false";
}

std::string states_literal(const message_filter& f) {
  std::vector<std::string> states = f.states;
  if (states.empty())
    states = {"queued", "running"};
  return array_literal(states);
}

} // namespace

std::int64_t pause_lock_key(const area& a, const std::string& queue) {
  // The area's lock class in the high half, an FNV-1a hash of the queue name in the low one.
  std::uint32_t h = 2166136261u;
  for (unsigned char c : queue) {
    h ^= c;
    h *= 16777619u;
  }
  auto high = static_cast<std::uint64_t>(static_cast<std::uint32_t>(node_lock_class(a)));
  return static_cast<std::int64_t>((high << 32) | h);
}

std::string claim_pause_gate_sql(const area& a, const std::string& queue) {
  return fmt::format("SELECT pg_advisory_xact_lock_shared({})", pause_lock_key(a, queue));
}

queue_control set_queue_paused(connection& conn, const statement_set& stmts,
                               const std::string& queue, bool paused) {
  conn.begin("set_queue_paused");
  try {
    auto res = conn.run(stmts.get(sql::set_queue_paused),
                        {queue, bool_text(paused), wake_channel(stmts.where())});
    if (paused) {
      // A claim that never ends (a frozen node's open transaction) must not hold the pause, and
      // every claim queued behind it, for ever.
      conn.exec("SET LOCAL lock_timeout = '10s'", "set_queue_paused");
      try {
        conn.run(stmts.get(sql::wait_for_claims),
                 {std::to_string(pause_lock_key(stmts.where(), queue))});
      } catch (const error& e) {
        if (e.sqlstate() != "55P03")
          throw;
        throw error(errc::timeout,
                    "pausing queue " + queue +
                      " waited 10 s for a claim in flight to end (a node's transaction left "
                      "open?): nothing changed, try again");
      }
    }
    conn.commit("set_queue_paused");
    queue_control out;
    out.queue = queue;
    if (res.rows() > 0) { // none: a resume of a queue never paused
      out.paused = res.text(0, 0) == "t";
      out.changed_at_ms = res.int64(0, 1);
    }
    return out;
  } catch (...) {
    conn.rollback_quietly();
    throw;
  }
}

std::vector<queue_control> queue_control_status(connection& conn, const statement_set& stmts,
                                                const std::vector<std::string>& queues) {
  params p{queues.empty() ? std::nullopt : std::optional<std::string>(array_literal(queues))};
  auto res = conn.run(stmts.get(sql::queue_control_status), p);
  std::vector<queue_control> out;
  for (int r = 0; r < res.rows(); ++r) {
    queue_control q;
    q.queue = std::string(res.text(r, 0));
    q.paused = res.text(r, 1) == "t";
    if (!res.is_null(r, 2))
      q.changed_at_ms = res.int64(r, 2);
    out.push_back(std::move(q));
  }
  return out;
}

control_state control_poll(connection& conn, const statement_set& stmts, std::int32_t node_id,
                           const std::vector<std::string>& queues) {
  auto res =
    conn.run(stmts.get(sql::control_poll), {std::to_string(node_id), array_literal(queues)});
  control_state out;
  for (int r = 0; r < res.rows(); ++r) {
    if (res.text(r, 0) == "paused")
      out.paused.emplace_back(res.text(r, 1));
    else
      out.cancels.emplace_back(std::string(res.text(r, 1)), std::string(res.text(r, 2)));
  }
  return out;
}

std::int64_t mark_started(connection& conn, const statement_set& stmts, std::int32_t node_id,
                          const std::vector<started_attempt>& attempts) {
  if (attempts.empty())
    return 0;
  std::vector<std::string> ids, numbers, elapsed;
  for (const auto& a : attempts) {
    ids.push_back(a.id);
    numbers.push_back(std::to_string(a.attempt));
    elapsed.push_back(std::to_string(a.elapsed_ms));
  }
  return conn
    .run(stmts.get(sql::mark_started), {std::to_string(node_id), array_literal(ids),
                                        array_literal(numbers), array_literal(elapsed)})
    .affected();
}

std::vector<std::string> confirm_starts(connection& conn, const statement_set& stmts,
                                        std::int32_t node_id,
                                        const std::vector<started_attempt>& attempts) {
  // Only a version-5 claim marks a message confirm_start: no version check here (a failed
  // statement is an unknown verdict, never "not this node's").
  std::vector<std::string> written;
  if (attempts.empty())
    return written;
  auto res = conn.run(
    stmts.get(sql::confirm_start),
    {std::to_string(node_id),
     detail::column(attempts, [](const started_attempt& a) { return a.id; }),
     detail::column(attempts, [](const started_attempt& a) { return std::to_string(a.attempt); })});
  for (int r = 0; r < res.rows(); ++r)
    written.emplace_back(res.text(r, 0));
  return written;
}

std::int64_t write_progress(connection& conn, const statement_set& stmts, std::int32_t node_id,
                            const std::vector<progress_update>& updates) {
  // An area before migration 5 has no progress column: the node runs without progress.
  if (updates.empty() || stmts.version() < 5)
    return 0;
  std::vector<std::string> ids, numbers, values;
  for (const auto& u : updates) {
    ids.push_back(u.id);
    numbers.push_back(std::to_string(u.attempt));
    values.push_back(u.progress_json);
  }
  return conn
    .run(stmts.get(sql::write_progress), {std::to_string(node_id), array_literal(ids),
                                          array_literal(numbers), array_literal(values)})
    .affected();
}

cancel_report cancel_message(connection& conn, const statement_set& stmts, const std::string& id) {
  auto res = conn.run(stmts.get(sql::cancel_message),
                      {id, results_channel(stmts.where()), wake_channel(stmts.where())});
  cancel_report out;
  out.message_id = id;
  if (res.rows() == 0)
    return out; // missing
  auto before = res.text(0, 0);
  out.state = std::string(res.text(0, 1));
  if (before == "done" || before == "failed")
    out.outcome = cancel_outcome::terminal;
  else if (before == "running")
    out.outcome = cancel_outcome::requested;
  else
    out.outcome = cancel_outcome::cancelled; // queued, or cancelled already
  return out;
}

cancel_counts cancel_matching(connection& conn, const statement_set& stmts,
                              const message_filter& filter, std::int32_t limit) {
  auto res =
    conn.run(stmts.get(sql::cancel_matching),
             {filter.queue, filter.task, states_literal(filter), results_channel(stmts.where()),
              std::to_string(limit), wake_channel(stmts.where())});
  return cancel_counts{res.int64(0, 0), res.int64(0, 1)};
}

bool matching_left(connection& conn, const statement_set& stmts, const message_filter& filter) {
  return conn
           .run(stmts.get(sql::matching_left), {filter.queue, filter.task, states_literal(filter)})
           .text(0, 0) == "t";
}

cancel_state cancel_status(connection& conn, const statement_set& stmts, const std::string& id) {
  auto res = conn.run(stmts.get(sql::cancel_status), {id});
  cancel_state out;
  out.message_id = id;
  if (res.rows() > 0) {
    out.state = std::string(res.text(0, 0));
    out.requested = res.text(0, 1) == "t";
  }
  return out;
}

namespace {

// The columns failed_messages and failed_message share (the first eight).
failed_message read_failed(const result& res, int r) {
  failed_message m;
  m.message_id = std::string(res.text(r, 0));
  m.queue = std::string(res.text(r, 1));
  m.task = std::string(res.text(r, 2));
  m.attempts = static_cast<std::int32_t>(res.int64(r, 3));
  if (!res.is_null(r, 4))
    m.error_json = std::string(res.text(r, 4));
  m.enqueued_at_ms = res.int64(r, 5);
  m.finished_at_ms = res.is_null(r, 6) ? 0 : res.int64(r, 6);
  m.priority = static_cast<std::int32_t>(res.int64(r, 7));
  return m;
}

} // namespace

failed_page failed_messages(connection& conn, const statement_set& stmts, const failed_query& q) {
  // One row more than the page tells whether another page follows.
  auto res = conn.run(stmts.get(sql::failed_messages),
                      {q.after, q.queue, q.task, std::to_string(q.limit + 1)});
  failed_page out;
  for (int r = 0; r < res.rows() && r < q.limit; ++r)
    out.items.push_back(read_failed(res, r));
  if (res.rows() > q.limit && !out.items.empty())
    out.next_after = out.items.back().message_id;
  return out;
}

std::optional<failed_message> failed_message_by_id(connection& conn, const statement_set& stmts,
                                                   const std::string& id, std::string& state) {
  auto res = conn.run(stmts.get(sql::failed_message), {id});
  state = res.rows() > 0 ? std::string(res.text(0, 10)) : std::string{};
  if (state != "failed")
    return std::nullopt;
  auto m = read_failed(res, 0);
  m.args_json = std::string(res.text(0, 8));
  m.options_json = std::string(res.text(0, 9));
  return m;
}

retry_report retry_message(connection& conn, const statement_set& stmts, const std::string& id) {
  auto res = conn.run(stmts.get(sql::retry_message), {id, wake_channel(stmts.where())});
  retry_report out;
  out.message_id = id;
  if (res.rows() == 0)
    return out;
  if (res.text(0, 2) == "t") {
    out.outcome = retry_outcome::retried;
    out.state = "queued";
  } else {
    out.outcome = retry_outcome::not_failed;
    out.state = std::string(res.text(0, 0));
  }
  return out;
}

std::string database_now(connection& conn, const statement_set& stmts) {
  return std::string(conn.run(stmts.get(sql::now), {}).text(0, 0));
}

std::int64_t retry_matching(connection& conn, const statement_set& stmts,
                            const message_filter& filter, std::int32_t limit,
                            const std::string& begun) {
  return conn
    .run(stmts.get(sql::retry_matching),
         {filter.queue, filter.task, std::to_string(limit), wake_channel(stmts.where()), begun})
    .int64(0, 0);
}

std::int64_t purge_finished(connection& conn, const statement_set& stmts, const retention& r,
                            std::int32_t limit) {
  std::int64_t total = 0;
  for (auto [state, window] : {std::pair{"done", r.done_ms}, std::pair{"failed", r.failed_ms},
                               std::pair{"cancelled", r.cancelled_ms}}) {
    if (window <= 0)
      continue;
    total +=
      conn
        .run(stmts.get(sql::purge_finished), {state, std::to_string(window), std::to_string(limit),
                                              std::to_string(node_lock_class(stmts.where()))})
        .int64(0, 0);
  }
  // Finished groups (migration 6) go with the retention of their state; their members' rows
  // follow their own.
  if (stmts.version() >= 6)
    for (auto [state, window] : {std::pair{"done", r.done_ms}, std::pair{"failed", r.failed_ms}})
      if (window > 0)
        total += conn
                   .run(stmts.get(sql::purge_groups),
                        {state, std::to_string(window), std::to_string(limit)})
                   .int64(0, 0);
  // Expired slots and barriers (migration 7), and limiters unused for the retention of done
  // messages (a week when done messages are kept for ever).
  if (stmts.version() >= coordination_version)
    total += purge_coordination(conn, stmts, r.done_ms > 0 ? r.done_ms : 7LL * 24 * 3600 * 1000);
  return total;
}

std::optional<group_row> read_group(connection& conn, const statement_set& stmts,
                                    const std::string& id) {
  auto res = conn.run(stmts.get(sql::read_group), {id});
  if (res.rows() == 0)
    return std::nullopt;
  group_row g;
  g.id = res.text(0, 0);
  g.state = res.text(0, 1);
  g.total = static_cast<std::int32_t>(res.int64(0, 2));
  g.succeeded = static_cast<std::int32_t>(res.int64(0, 3));
  g.failed = static_cast<std::int32_t>(res.int64(0, 4));
  g.error_json = res.text(0, 5);
  g.created_at_ms = res.int64(0, 6);
  g.finished_at_ms = res.int64(0, 7);
  return g;
}

std::int64_t expire_results(connection& conn, const statement_set& stmts, std::int32_t limit) {
  return conn.run(stmts.get(sql::expire_results), {std::to_string(limit)}).int64(0, 0);
}

namespace {

// invalid_argument unless `interval` is a positive PostgreSQL interval.
void check_positive_interval(connection& conn, const statement_set& stmts,
                             const std::string& interval) {
  bool positive = false;
  try {
    positive = conn.run(stmts.get(sql::interval_positive), {interval}).text(0, 0) == "t";
  } catch (const error& e) {
    if (e.code() == errc::connection_lost)
      throw;
    throw error(errc::invalid_argument,
                "\"" + interval + "\" is not a PostgreSQL interval (such as '30 days' or '12h')");
  }
  if (!positive)
    throw error(errc::invalid_argument, "the age \"" + interval + "\" must be positive");
}

history_setting read_setting(const result& res) {
  history_setting out;
  if (res.rows() > 0) {
    out.enabled = res.text(0, 0) == "t";
    out.changed_at_ms = res.int64(0, 1);
  }
  return out;
}

} // namespace

std::int64_t purge_older(connection& conn, const statement_set& stmts,
                         const std::vector<std::string>& states, const std::string& interval,
                         std::int32_t limit) {
  check_positive_interval(conn, stmts, interval);
  return conn
    .run(stmts.get(sql::purge_older), {array_literal(states), interval, std::to_string(limit)})
    .int64(0, 0);
}

history_setting attempt_history_setting(connection& conn, const statement_set& stmts) {
  return read_setting(conn.run(stmts.get(sql::attempt_history_setting), {}));
}

history_setting set_attempt_history(connection& conn, const statement_set& stmts, bool on) {
  return read_setting(conn.run(stmts.get(sql::set_attempt_history), {bool_text(on)}));
}

attempt_page attempt_history(connection& conn, const statement_set& stmts, const std::string& id,
                             std::optional<std::int64_t> after, std::int32_t limit) {
  // One row more than the page tells whether another page follows.
  auto res =
    conn.run(stmts.get(sql::attempt_history),
             {id, after ? std::optional<std::string>(std::to_string(*after)) : std::nullopt,
              std::to_string(limit + 1)});
  attempt_page out;
  for (int r = 0; r < res.rows() && r < limit; ++r) {
    attempt_record a;
    if (!res.is_null(r, 0))
      a.attempt_id = res.int64(r, 0);
    a.message_id = std::string(res.text(r, 1));
    a.attempt = static_cast<std::int32_t>(res.int64(r, 2));
    a.queue = std::string(res.text(r, 3));
    a.task = std::string(res.text(r, 4));
    if (!res.is_null(r, 5))
      a.node_id = static_cast<std::int32_t>(res.int64(r, 5));
    a.started_at_ms = res.int64(r, 6);
    if (!res.is_null(r, 7))
      a.finished_at_ms = res.int64(r, 7);
    if (!res.is_null(r, 8))
      a.outcome = std::string(res.text(r, 8));
    a.error_type = std::string(res.text(r, 9));
    a.error_text = std::string(res.text(r, 10));
    if (!res.is_null(r, 11))
      a.duration_ms = res.int64(r, 11);
    out.items.push_back(std::move(a));
  }
  // The attempt that runs now comes last, so a page followed by another ends with a record.
  if (res.rows() > limit && !out.items.empty())
    out.next_after = out.items.back().attempt_id;
  return out;
}

std::int64_t purge_attempts(connection& conn, const statement_set& stmts,
                            const std::string& interval, std::int32_t limit) {
  check_positive_interval(conn, stmts, interval);
  return conn.run(stmts.get(sql::purge_attempts), {interval, std::to_string(limit)}).int64(0, 0);
}

std::int64_t flush_queue(connection& conn, const statement_set& stmts, const std::string& queue,
                         std::int32_t limit) {
  return conn.run(stmts.get(sql::flush_queue), {queue, std::to_string(limit)}).int64(0, 0);
}

std::vector<std::string> missing_indexes(connection& conn, const statement_set& stmts) {
  const auto& a = stmts.where();
  std::vector<std::string> wanted;
  for (const char* name : {"queue_fetch_idx", "queue_running_idx", "queue_finished_idx",
                           "queue_failed_idx", "queue_history_idx", "queue_result_expiry_idx"})
    wanted.push_back(quote_identifier(a.schema) + "." + quote_identifier(a.prefix + name));
  auto res = conn.run(stmts.get(sql::missing_indexes), {array_literal(wanted)});
  std::vector<std::string> out;
  for (int r = 0; r < res.rows(); ++r)
    out.emplace_back(res.text(r, 0));
  return out;
}

} // namespace troupe::storage
