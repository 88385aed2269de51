#include "storage/grants.hpp"

#include "storage/migrations.hpp"
#include "storage/naming.hpp"
#include "storage/statements.hpp"

#include <fmt/format.h>

namespace troupe::storage {

namespace {

std::string quote_literal(const std::string& text) {
  std::string out = "'";
  for (char c : text)
    out += c == '\'' ? std::string("''") : std::string(1, c);
  return out + "'";
}

// Every role: the schema, and the versions table (each connection checks the area's version).
constexpr std::string_view common = R"(GRANT USAGE ON SCHEMA {{schema}} TO {role};
GRANT SELECT ON {{t:versions}} TO {role};
)";

// Publishing (one at a time, in batches, by COPY, deduplicated, inside the caller's
// transaction, a re-send of an id) and reading results. A re-send puts a row back in its
// queue: it updates the columns a publish sets, and no others (not attempts, cancel requests,
// progress or ownership beyond clearing it). Its ON CONFLICT DO UPDATE reads the columns it
// sets, so the producer may read them too (arguments included). Groups are written by the
// queue table's triggers with the area owner's rights, whoever publishes or finishes a member;
// the producer reads their rows. Limiters and barriers are taken, given back and passed by
// functions with the area owner's rights (migration 7); every role reads their rows.
constexpr std::string_view producer =
  R"(GRANT SELECT (message_id, queue_name, task_name, args, options, priority, eta,
              enqueued_at, state, result, result_expires_at, error),
      INSERT (message_id, queue_name, task_name, args, options, priority, eta, enqueued_at),
      UPDATE (queue_name, task_name, args, options, priority, eta, state, owner_node,
              started_at, finished_at, result, error)
   ON {{t:queue}} TO {role};
GRANT SELECT, INSERT, UPDATE, DELETE ON {{t:deduplication}} TO {role};
GRANT INSERT ON {{t:state_count_changes}} TO {role};
GRANT SELECT ON {{t:groups}}, {{t:coordination}}, {{t:coordination_holds}} TO {role};
)";

// Claiming, running and completing messages, publishing follow-ups, the node registry and its
// janitor (recovery, retention, the finished counts), attempt history, and the scheduler (reads
// schedules and moves them on). Reads the pause and history settings, never writes them.
constexpr std::string_view node = R"(GRANT SELECT, INSERT, UPDATE, DELETE
   ON {{t:queue}}, {{t:nodes}}, {{t:deduplication}}, {{t:attempts}}, {{t:state_counts}},
      {{t:state_count_changes}} TO {role};
GRANT SELECT ON {{t:queue_control}}, {{t:area_settings}} TO {role};
GRANT SELECT, DELETE ON {{t:groups}}, {{t:group_members}}, {{t:coordination}},
      {{t:coordination_holds}} TO {role};
GRANT SELECT, UPDATE ON {{t:schedules}} TO {role};
)";

// Everything the `troupe` verbs do to an area's rows: pause, cancel, retry, purge, flush,
// recover, the states, the statistics and their recount, attempt history and its setting, the
// schedules (`troupe schedule`). No DDL: init and upgrade stay with the area's owner.
constexpr std::string_view operator_ = R"(GRANT SELECT, INSERT, UPDATE, DELETE
   ON {{t:queue}}, {{t:nodes}}, {{t:deduplication}}, {{t:attempts}}, {{t:state_counts}},
      {{t:state_count_changes}} TO {role};
GRANT SELECT, INSERT, UPDATE ON {{t:queue_control}} TO {role};
GRANT SELECT, UPDATE ON {{t:area_settings}} TO {role};
GRANT SELECT, DELETE ON {{t:groups}}, {{t:group_members}}, {{t:coordination}},
      {{t:coordination_holds}} TO {role};
GRANT SELECT, INSERT, UPDATE, DELETE ON {{t:schedules}} TO {role};
)";

// The identity sequences of the tables a role inserts into (node ids, attempt ids).
std::string sequences(const area& a, const std::string& role) {
  return render_sql(fmt::format(R"(DO $grants$
BEGIN
  EXECUTE format('GRANT USAGE ON SEQUENCE %s, %s TO %I',
                 pg_get_serial_sequence('{{{{t:nodes}}}}', 'node_id'),
                 pg_get_serial_sequence('{{{{t:attempts}}}}', 'attempt_id'), {});
END
$grants$;
)",
                                quote_literal(role)),
                    a);
}

std::string for_role(const area& a, std::string_view part, const std::string& role) {
  std::string text = render_sql(std::string(common) + std::string(part), a);
  std::string quoted = quote_identifier(role);
  for (auto at = text.find("{role}"); at != std::string::npos; at = text.find("{role}", at))
    text.replace(at, 6, quoted);
  return text;
}

} // namespace

std::string grants_script(const area& a, const area_roles& roles) {
  std::string out = fmt::format("-- Troupe grants for schema {} (prefix \"{}\"), migration {}.\n",
                                a.schema, a.prefix, latest_migration());
  out += "BEGIN;\n";
  if (!roles.producer.empty())
    out += "-- producer\n" + for_role(a, producer, roles.producer);
  if (!roles.node.empty())
    out += "-- node\n" + for_role(a, node, roles.node) + sequences(a, roles.node);
  if (!roles.operator_role.empty())
    out += "-- operator\n" + for_role(a, operator_, roles.operator_role) +
           sequences(a, roles.operator_role);
  out += "COMMIT;\n";
  return out;
}

} // namespace troupe::storage
