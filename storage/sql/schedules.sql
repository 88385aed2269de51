-- Statements on the schedules of migration 9 (docs/scheduler.md). Times travel as whole
-- milliseconds since the Unix epoch ($n::bigint), read back the same way, so that an interval's
-- grid is exact.

-- name: schedule_clock
-- The database's clock, in milliseconds: the "now" of a tick, and the default start.
SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint

-- name: schedule_create
-- A new schedule, or no row (and nothing overwritten) when the name is taken.
INSERT INTO {{t:schedules}} (name, task_name, queue_name, args, options, priority, interval_ms,
                             cron, time_zone, enabled, start_at, next_run, overlap, catch_up,
                             jitter_ms)
VALUES ($1, $2, $3, $4::jsonb, $5::jsonb, $6::integer, $7::bigint, $8, $9, $10::boolean,
        to_timestamp(0) + $11::bigint * interval '1 millisecond',
        to_timestamp(0) + $12::bigint * interval '1 millisecond', $13, $14, $15::bigint)
ON CONFLICT (name) DO NOTHING
RETURNING schedule_id::text

-- name: schedule_list
-- Every schedule by name, without arguments or options ($1: with them, for show, $2: one name,
-- or NULL for all), with the names of the registered nodes that run its task.
SELECT s.schedule_id::text, s.name, s.task_name, s.queue_name,
       CASE WHEN $1::boolean THEN s.args::text END, CASE WHEN $1::boolean THEN s.options::text END,
       s.priority, s.interval_ms, s.cron, s.time_zone, s.enabled,
       floor(extract(epoch FROM s.start_at) * 1000)::bigint,
       floor(extract(epoch FROM s.next_run) * 1000)::bigint, s.overlap, s.catch_up, s.jitter_ms,
       floor(extract(epoch FROM s.last_occurrence) * 1000)::bigint, s.last_outcome,
       s.last_message_id::text, s.published,
       floor(extract(epoch FROM s.created_at) * 1000)::bigint,
       ARRAY(SELECT n.name FROM {{t:nodes}} n WHERE s.task_name = ANY (n.tasks)
              ORDER BY n.node_id)::text,
       (SELECT q.state::text FROM {{t:queue}} q WHERE q.message_id = s.last_message_id),
       s.last_error
  FROM {{t:schedules}} s
 WHERE $2::text IS NULL OR s.name = $2
 ORDER BY s.name

-- name: schedule_set_enabled
-- Enables or disables schedule $1: one row when it exists. Waits for a tick that holds it.
UPDATE {{t:schedules}} SET enabled = $2::boolean, updated_at = now() WHERE name = $1

-- name: schedule_delete
DELETE FROM {{t:schedules}} WHERE name = $1

-- name: schedule_due
-- A tick's rows: up to $2 enabled schedules due at $1 (ms), earliest first, locked so that no
-- other scheduler takes them until this tick commits (the ones another tick holds are skipped).
-- Per row, its occurrence (the due next_run, as UTC ISO-8601), the message id derived from the
-- schedule and the occurrence, and whether its last message is still queued or running.
SELECT s.schedule_id::text, s.name, s.task_name, s.queue_name, s.args::text, s.options::text,
       s.priority, s.interval_ms, s.cron, s.time_zone,
       floor(extract(epoch FROM s.next_run) * 1000)::bigint, s.overlap, s.catch_up, s.jitter_ms,
       to_char(s.next_run AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'),
       md5(s.schedule_id::text || ':' ||
           to_char(s.next_run AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'))::uuid::text,
       coalesce((SELECT q.state IN ('queued', 'running') FROM {{t:queue}} q
                  WHERE q.message_id = s.last_message_id), false)
  FROM {{t:schedules}} s
 WHERE s.enabled AND s.next_run <= to_timestamp(0) + $1::bigint * interval '1 millisecond'
 ORDER BY s.next_run, s.schedule_id
 LIMIT $2::integer
   FOR UPDATE OF s SKIP LOCKED

-- name: schedule_advance
-- After a tick handled schedule $1's occurrence: its next one ($2 ms), what it did ($3:
-- published, overlap, missed or failed), the message it published ($4, or NULL) and why its
-- publish failed ($5, or NULL).
UPDATE {{t:schedules}}
   SET last_occurrence = next_run,
       next_run = to_timestamp(0) + $2::bigint * interval '1 millisecond',
       last_outcome = $3, last_message_id = coalesce($4::uuid, last_message_id),
       last_error = $5,
       published = published + CASE WHEN $3 = 'published' THEN 1 ELSE 0 END, updated_at = now()
 WHERE schedule_id = $1::uuid
