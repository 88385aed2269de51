#include "storage/schedules.hpp"

#include <fmt/format.h>

namespace troupe::storage {

namespace {

std::optional<std::int64_t> optional_int64(const result& res, int r, int c) {
  if (res.is_null(r, c))
    return std::nullopt;
  return res.int64(r, c);
}

std::string text_or_empty(const result& res, int r, int c) {
  return res.is_null(r, c) ? std::string{} : std::string(res.text(r, c));
}

overlap_policy read_overlap(std::string_view text) {
  return text == "skip" ? overlap_policy::skip : overlap_policy::allow;
}

catch_up_policy read_catch_up(std::string_view text) {
  return text == "none" ? catch_up_policy::none : catch_up_policy::coalesce;
}

} // namespace

error schedules_missing(int version) {
  return error(errc::invalid_argument,
               fmt::format("schedules need migration {} (the area is at version {}): run troupe "
                           "upgrade",
                           schedules_version, version));
}

std::int64_t database_clock_ms(connection& conn, const statement_set& stmts) {
  return conn.run(stmts.get(sql::schedule_clock), {}).int64(0, 0);
}

std::optional<std::string> create_schedule(connection& conn, const statement_set& stmts,
                                           const schedule_spec& spec, std::int64_t start_ms,
                                           std::int64_t next_run_ms) {
  std::optional<std::string> interval;
  if (spec.interval)
    interval = std::to_string(spec.interval->count());
  std::optional<std::string> cron;
  if (!spec.interval)
    cron = spec.cron;
  auto res =
    conn.run(stmts.get(sql::schedule_create),
             {spec.name, spec.task, spec.queue, spec.args_json, spec.options_json,
              std::to_string(spec.priority), interval, cron,
              spec.interval ? std::string("UTC") : spec.time_zone, spec.enabled ? "true" : "false",
              std::to_string(start_ms), std::to_string(next_run_ms), to_string(spec.overlap),
              to_string(spec.catch_up), std::to_string(spec.jitter.count())});
  if (res.rows() == 0)
    return std::nullopt;
  return std::string(res.text(0, 0));
}

std::vector<schedule_record> list_schedules(connection& conn, const statement_set& stmts,
                                            bool payload, const std::optional<std::string>& name) {
  auto res = conn.run(stmts.get(sql::schedule_list), {payload ? "true" : "false", name});
  std::vector<schedule_record> out;
  out.reserve(static_cast<std::size_t>(res.rows()));
  for (int r = 0; r < res.rows(); ++r) {
    schedule_record s;
    s.id = res.text(r, 0);
    s.name = res.text(r, 1);
    s.task = res.text(r, 2);
    s.queue = res.text(r, 3);
    if (!res.is_null(r, 4))
      s.args_json = std::string(res.text(r, 4));
    if (!res.is_null(r, 5))
      s.options_json = std::string(res.text(r, 5));
    s.priority = static_cast<std::int32_t>(res.int64(r, 6));
    s.interval_ms = optional_int64(res, r, 7);
    s.cron = text_or_empty(res, r, 8);
    s.time_zone = res.text(r, 9);
    s.enabled = res.text(r, 10) == "t";
    s.start_at_ms = res.int64(r, 11);
    s.next_run_ms = res.int64(r, 12);
    s.overlap = read_overlap(res.text(r, 13));
    s.catch_up = read_catch_up(res.text(r, 14));
    s.jitter_ms = res.int64(r, 15);
    s.last_occurrence_ms = optional_int64(res, r, 16);
    s.last_outcome = text_or_empty(res, r, 17);
    s.last_message_id = text_or_empty(res, r, 18);
    s.published = res.int64(r, 19);
    s.created_at_ms = res.int64(r, 20);
    s.registered_by = parse_array_literal(res.text(r, 21));
    s.last_message_state = text_or_empty(res, r, 22);
    s.last_error = text_or_empty(res, r, 23);
    out.push_back(std::move(s));
  }
  return out;
}

bool set_schedule_enabled(connection& conn, const statement_set& stmts, const std::string& name,
                          bool enabled) {
  return conn.run(stmts.get(sql::schedule_set_enabled), {name, enabled ? "true" : "false"})
           .affected() > 0;
}

bool delete_schedule(connection& conn, const statement_set& stmts, const std::string& name) {
  return conn.run(stmts.get(sql::schedule_delete), {name}).affected() > 0;
}

std::vector<due_schedule> lock_due_schedules(connection& conn, const statement_set& stmts,
                                             std::int64_t now_ms, std::int32_t limit) {
  auto res =
    conn.run(stmts.get(sql::schedule_due), {std::to_string(now_ms), std::to_string(limit)});
  std::vector<due_schedule> out;
  out.reserve(static_cast<std::size_t>(res.rows()));
  for (int r = 0; r < res.rows(); ++r) {
    due_schedule d;
    d.id = res.text(r, 0);
    d.name = res.text(r, 1);
    d.task = res.text(r, 2);
    d.queue = res.text(r, 3);
    d.args_json = res.text(r, 4);
    d.options_json = res.text(r, 5);
    d.priority = static_cast<std::int32_t>(res.int64(r, 6));
    d.interval_ms = optional_int64(res, r, 7);
    d.cron = text_or_empty(res, r, 8);
    d.time_zone = res.text(r, 9);
    d.occurrence_ms = res.int64(r, 10);
    d.overlap = read_overlap(res.text(r, 11));
    d.catch_up = read_catch_up(res.text(r, 12));
    d.jitter_ms = res.int64(r, 13);
    d.occurrence_text = res.text(r, 14);
    d.message_id = res.text(r, 15);
    d.previous_active = res.text(r, 16) == "t";
    out.push_back(std::move(d));
  }
  return out;
}

void advance_schedule(connection& conn, const statement_set& stmts, const std::string& id,
                      std::int64_t next_run_ms, const std::string& outcome,
                      const std::optional<std::string>& message_id,
                      const std::optional<std::string>& failure) {
  conn.run(stmts.get(sql::schedule_advance),
           {id, std::to_string(next_run_ms), outcome, message_id, failure});
}

void occurrence_savepoint(connection& conn) {
  conn.exec("SAVEPOINT troupe_occurrence", "schedule_occurrence");
}

void release_occurrence_savepoint(connection& conn) {
  conn.exec("RELEASE SAVEPOINT troupe_occurrence", "schedule_occurrence");
}

void rollback_to_occurrence_savepoint(connection& conn) {
  conn.exec("ROLLBACK TO SAVEPOINT troupe_occurrence", "schedule_occurrence");
}

} // namespace troupe::storage
