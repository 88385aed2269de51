-- Statements of the operations: pausing queues, cancelling messages, failed messages and their
-- retry, and what a node writes and reads to honour them (starts, the control poll). They need
-- migration 5 (queue_control, cancel_requested), the admin API checks the area's version first.

-- name: mark_started
-- Node $1 started these messages (ids $2 at their claims' attempts $3) $4 milliseconds ago each
-- and they still run: their rows say so from now on. A row whose delivery ended, or that the
-- node no longer owns, is left alone. Runs once a second at most, for attempts that run longer
-- than that, an attempt that ends sooner gets its start with its outcome (complete_batch).
UPDATE {{t:queue}} q
   SET started_at = now() - s.elapsed_ms * interval '1 millisecond'
  FROM unnest($2::uuid[], $3::integer[], $4::bigint[]) AS s(id, attempt, elapsed_ms)
 WHERE q.message_id = ANY ($2::uuid[])
   AND q.message_id = s.id AND q.owner_node = $1 AND q.attempts = s.attempt
   AND q.state = 'running' AND q.started_at IS NULL

-- name: confirm_start
-- Node $1 starts these messages (ids $2 at their claims' attempts $3) now, and they came back
-- from a dead node (confirm_start): their start is written before their tasks run. Returns the
-- ids written: a row the node no longer owns at that attempt is left alone, and its task does
-- not run. A start written already (by the claim) stays.
UPDATE {{t:queue}} q
   SET started_at = coalesce(q.started_at, now()), confirm_start = false
  FROM unnest($2::uuid[], $3::integer[]) AS s(id, attempt)
 WHERE q.message_id = ANY ($2::uuid[])
   AND q.message_id = s.id AND q.owner_node = $1 AND q.attempts = s.attempt
   AND q.state = 'running'
RETURNING q.message_id::text

-- name: write_progress
-- The progress that tasks of node $1 reported while they run (ids $2 at their claims' attempts
-- $3, values $4): one row version per message, for the latest value since the last write. A
-- row whose delivery ended, or that the node no longer owns, is left alone.
UPDATE {{t:queue}} q
   SET progress = p.progress
  FROM unnest($2::uuid[], $3::integer[], $4::jsonb[]) AS p(id, attempt, progress)
 WHERE q.message_id = ANY ($2::uuid[])
   AND q.message_id = p.id AND q.attempts = p.attempt AND q.owner_node = $1
   AND q.state = 'running'

-- name: control_poll
-- What node $1 checks every second besides the notifications that tell it sooner: which of its
-- queues ($2) are paused, and which of the messages it holds had their cancel requested. Reads
-- the node's running rows through the running index (at most its capacity).
SELECT 'paused', c.queue_name, NULL::text
  FROM {{t:queue_control}} c
 WHERE c.paused AND c.queue_name = ANY ($2::text[])
UNION ALL
SELECT 'cancel', q.queue_name, q.message_id::text
  FROM {{t:queue}} q
 WHERE q.state = 'running' AND q.owner_node = $1 AND q.cancel_requested

-- name: set_queue_paused
-- Pauses ($2 true) or resumes ($2 false) queue $1 and tells every node of the area (channel $3,
-- payload "!" and the queue), a resume also wakes the queue's consumers. changed_at moves only
-- when the state does, and a resume of a queue never paused writes nothing (no row comes
-- back). Returns the state and when it last changed (Unix ms).
WITH c AS (
  INSERT INTO {{t:queue_control}} AS c (queue_name, paused, changed_at)
  SELECT $1, $2::boolean, now()
   WHERE $2::boolean OR EXISTS (SELECT FROM {{t:queue_control}} x WHERE x.queue_name = $1)
  ON CONFLICT (queue_name) DO UPDATE
     SET paused = excluded.paused,
         changed_at = CASE WHEN c.paused = excluded.paused THEN c.changed_at
                           ELSE excluded.changed_at END
  RETURNING c.paused, c.changed_at)
SELECT c.paused, (date_part('epoch', c.changed_at) * 1000)::bigint,
       (SELECT count(*) FROM (SELECT pg_notify($3, '!' || $1)) n),
       (SELECT count(*) FROM (SELECT pg_notify($3, $1) WHERE NOT $2::boolean) w)
  FROM c

-- name: wait_for_claims
-- Inside a pause's transaction, after its update: waits for every claim of the queue in flight
-- (each holds this lock shared from before its snapshot to its commit, see claim_lock), and
-- keeps claims that come later waiting until the pause commits. $1 is the queue's pause lock.
SELECT pg_advisory_xact_lock($1::bigint)::text

-- name: queue_control_status
-- Whether each queue of $1 is paused, and since when (Unix ms, NULL when never paused or
-- resumed). NULL $1: every queue that was ever paused or resumed, and every queue a registered
-- node consumes. Never reads the queue table.
WITH names AS (
  SELECT unnest($1::text[]) AS queue_name WHERE $1::text[] IS NOT NULL
  UNION
  SELECT c.queue_name FROM {{t:queue_control}} c WHERE $1::text[] IS NULL
  UNION
  SELECT unnest(n.queues) FROM {{t:nodes}} n WHERE $1::text[] IS NULL)
SELECT n.queue_name, coalesce(c.paused, false),
       (date_part('epoch', c.changed_at) * 1000)::bigint
  FROM names n LEFT JOIN {{t:queue_control}} c ON c.queue_name = n.queue_name
 ORDER BY n.queue_name

-- name: cancel_message
-- Cancels message $1. A queued row (ready or delayed) is cancelled now, and result waiters are
-- woken (channel $2). A running row (claimed by a node, started or not) gets its cancel
-- requested, and every node is told (channel $3): its node cancels it if it has not started it,
-- and otherwise tells its task. A finished row is left as it is. The row is locked first, so
-- a claim or a completion in progress is waited for. Returns the state before and after and
-- whether a cancel was requested before, no row when the id is missing.
WITH b AS MATERIALIZED (
  SELECT q.message_id, q.state, q.cancel_requested
    FROM {{t:queue}} q
   WHERE q.message_id = $1::uuid
     FOR UPDATE),
u AS (
  UPDATE {{t:queue}} q
     SET state = CASE WHEN b.state = 'queued' THEN 'cancelled' ELSE q.state END::{{t:state}},
         cancel_requested = true,
         owner_node = CASE WHEN b.state = 'queued' THEN NULL ELSE q.owner_node END,
         finished_at = CASE WHEN b.state = 'queued' THEN now() ELSE q.finished_at END,
         result = CASE WHEN b.state = 'queued' THEN NULL ELSE q.result END
    FROM b
   WHERE q.message_id = b.message_id AND b.state IN ('queued', 'running')
     AND NOT (b.state = 'running' AND b.cancel_requested)
  RETURNING q.state, q.queue_name),
counted AS (
  INSERT INTO {{t:state_count_changes}} (queue_name, state, n)
  SELECT x.queue_name, x.state, count(*)
    FROM u x WHERE x.state = 'cancelled'
   GROUP BY 1, 2)
SELECT b.state::text, coalesce((SELECT u.state FROM u), b.state)::text, b.cancel_requested,
       (SELECT count(*) FROM (SELECT pg_notify($2, '')
                               WHERE EXISTS (SELECT FROM u WHERE u.state = 'cancelled')) r),
       (SELECT count(*) FROM (SELECT pg_notify($3, '!')
                               WHERE EXISTS (SELECT FROM u WHERE u.state = 'running')) n)
  FROM b

-- name: cancel_matching
-- Cancels up to $5 messages in the states $3 (queued, running) of queue $1 and task $2 (NULL:
-- any), as cancel_message does one: queued ones now, running ones by request. Rows another
-- transaction holds (a claim in progress) are skipped: the caller repeats until none is left.
-- Returns how many were cancelled and how many had their cancel requested.
WITH t AS (
  SELECT q.ctid, q.state
    FROM {{t:queue}} q
   WHERE q.state = ANY ($3::text[]::{{t:state}}[])
     AND ($1::text IS NULL OR q.queue_name = $1) AND ($2::text IS NULL OR q.task_name = $2)
     AND NOT (q.state = 'running' AND q.cancel_requested)
   LIMIT $5
     FOR UPDATE SKIP LOCKED),
u AS (
  UPDATE {{t:queue}} q
     SET state = CASE WHEN t.state = 'queued' THEN 'cancelled' ELSE q.state END::{{t:state}},
         cancel_requested = true,
         owner_node = CASE WHEN t.state = 'queued' THEN NULL ELSE q.owner_node END,
         finished_at = CASE WHEN t.state = 'queued' THEN now() ELSE q.finished_at END,
         result = CASE WHEN t.state = 'queued' THEN NULL ELSE q.result END
    FROM t
   WHERE q.ctid = t.ctid
  RETURNING q.state, q.queue_name),
counted AS (
  INSERT INTO {{t:state_count_changes}} (queue_name, state, n)
  SELECT x.queue_name, x.state, count(*)
    FROM u x WHERE x.state = 'cancelled'
   GROUP BY 1, 2)
SELECT (SELECT count(*) FROM u WHERE u.state = 'cancelled'),
       (SELECT count(*) FROM u WHERE u.state = 'running'),
       (SELECT count(*) FROM (SELECT pg_notify($4, '')
                               WHERE EXISTS (SELECT FROM u WHERE u.state = 'cancelled')) r),
       (SELECT count(*) FROM (SELECT pg_notify($6, '!')
                               WHERE EXISTS (SELECT FROM u WHERE u.state = 'running')) n)

-- name: matching_left
-- Whether any message that cancel_matching ($1, $2, $3) would change is left.
SELECT EXISTS (SELECT FROM {{t:queue}} q
                WHERE q.state = ANY ($3::text[]::{{t:state}}[])
                  AND ($1::text IS NULL OR q.queue_name = $1)
                  AND ($2::text IS NULL OR q.task_name = $2)
                  AND NOT (q.state = 'running' AND q.cancel_requested))

-- name: cancel_status
-- Message $1's state and whether its cancel was requested, no row when it is missing.
SELECT q.state::text, q.cancel_requested FROM {{t:queue}} q WHERE q.message_id = $1::uuid

-- name: failed_messages
-- Failed messages in message-id order after $1 (NULL: from the first), of queue $2 and task $3
-- when given, at most $4, without their arguments and options (failed_message has those).
-- Reads the failed index.
SELECT q.message_id::text, q.queue_name, q.task_name, q.attempts, q.error::text,
       (date_part('epoch', q.enqueued_at) * 1000)::bigint,
       (date_part('epoch', q.finished_at) * 1000)::bigint, q.priority
  FROM {{t:queue}} q
 WHERE q.state = 'failed' AND ($1::uuid IS NULL OR q.message_id > $1::uuid)
   AND ($2::text IS NULL OR q.queue_name = $2) AND ($3::text IS NULL OR q.task_name = $3)
 ORDER BY q.message_id
 LIMIT $4

-- name: failed_message
-- Message $1 as failed_messages reads it (with its arguments and options), and its state, which
-- the caller checks, no row when it is missing.
SELECT q.message_id::text, q.queue_name, q.task_name, q.attempts, q.error::text,
       (date_part('epoch', q.enqueued_at) * 1000)::bigint,
       (date_part('epoch', q.finished_at) * 1000)::bigint, q.priority,
       q.args::text, q.options::text, q.state::text
  FROM {{t:queue}} q
 WHERE q.message_id = $1::uuid

-- name: retry_message
-- (The row leaves the failed count through the queue table's trigger, queue_requeued.)
-- Puts failed message $1 back in its queue, due now, with a fresh start: no attempts so far,
-- no failure record, no result, no cancel request, no progress. Its id, task, arguments,
-- options (its retry policy among them) and priority stay. Only a failed row that no node
-- owns moves, the row lock makes concurrent retries wait, and the later ones find it queued.
-- The queue is woken (channel $2). Returns the state and owner before, and whether it moved,
-- no row when the id is missing.
WITH b AS MATERIALIZED (
  SELECT q.message_id, q.state, q.owner_node
    FROM {{t:queue}} q
   WHERE q.message_id = $1::uuid
     FOR UPDATE),
r AS (
  UPDATE {{t:queue}} q
     SET state = 'queued', attempts = 0, eta = now(), started_at = NULL, finished_at = NULL,
         result = NULL, result_expires_at = NULL, error = NULL, cancel_requested = false,
         progress = NULL
    FROM b
   WHERE q.message_id = b.message_id AND b.state = 'failed' AND b.owner_node IS NULL
  RETURNING q.queue_name)
SELECT b.state::text, b.owner_node, EXISTS (SELECT FROM r),
       (SELECT count(*) FROM (SELECT pg_notify($2, r.queue_name) FROM r) n)
  FROM b

-- name: retry_matching
-- retry_message for up to $3 failed messages of queue $1 and task $2 (NULL: any) that failed
-- at or before $5 (when the command began: a message retried by it that fails again is not
-- taken twice), rows another transaction holds are skipped. Returns how many moved, and wakes
-- each of their queues once. Reads the failed index.
WITH r AS (
  UPDATE {{t:queue}} q
     SET state = 'queued', attempts = 0, eta = now(), started_at = NULL, finished_at = NULL,
         result = NULL, result_expires_at = NULL, error = NULL, cancel_requested = false,
         progress = NULL
   WHERE q.ctid = ANY (ARRAY(
           SELECT f.ctid FROM {{t:queue}} f
            WHERE f.state = 'failed' AND f.owner_node IS NULL
              AND f.finished_at <= $5::timestamptz
              AND ($1::text IS NULL OR f.queue_name = $1)
              AND ($2::text IS NULL OR f.task_name = $2)
            LIMIT $3
              FOR UPDATE SKIP LOCKED))
  RETURNING q.queue_name)
SELECT (SELECT count(*) FROM r),
       (SELECT count(*) FROM (SELECT pg_notify($4, d.queue_name)
                                FROM (SELECT DISTINCT queue_name FROM r) d) n)

-- name: purge_finished
-- Deletes up to $3 rows in state $1 (done, failed or cancelled) that finished more than $2
-- milliseconds ago, oldest first, through the finished index, and returns how many. One node's
-- janitor purges at a time: a pass that finds another's purge in progress (the transaction lock
-- (lock class $4, -1)) deletes nothing. Rows another transaction holds are skipped.
WITH gate AS MATERIALIZED (SELECT pg_try_advisory_xact_lock($4::integer, -1) AS mine),
gone AS (
  DELETE FROM {{t:queue}}
   WHERE ctid = ANY (ARRAY(
           SELECT q.ctid FROM {{t:queue}} q
            WHERE q.state = $1::text::{{t:state}}
              AND q.finished_at < now() - $2::bigint * interval '1 millisecond'
              AND (SELECT g.mine FROM gate g)
            ORDER BY q.finished_at
            LIMIT $3
              FOR UPDATE SKIP LOCKED))
  RETURNING queue_name, state),
counted AS (
  INSERT INTO {{t:state_count_changes}} (queue_name, state, n)
  SELECT x.queue_name, x.state, -count(*)
    FROM gone x
   GROUP BY 1, 2)
SELECT count(*) FROM gone

-- name: expire_results
-- Clears up to $1 stored results whose result_ttl has passed, soonest expired first, through
-- the expiry index, and returns how many. The expiry stays, so that a read still says why
-- there is no result, and the row leaves the index. Rows another transaction holds are
-- skipped, and a read already reports these as expired.
WITH gone AS (
  UPDATE {{t:queue}} q
     SET result = NULL
   WHERE q.ctid = ANY (ARRAY(
           SELECT e.ctid FROM {{t:queue}} e
            WHERE e.result_expires_at <= now() AND e.result IS NOT NULL
            ORDER BY e.result_expires_at
            LIMIT $1
              FOR UPDATE SKIP LOCKED))
  RETURNING 1)
SELECT count(*) FROM gone

-- name: purge_older
-- `troupe purge`: deletes up to $3 finished rows in the states $1 that finished before now()
-- minus the interval $2, oldest first, and returns how many.
WITH gone AS (
  DELETE FROM {{t:queue}}
   WHERE ctid = ANY (ARRAY(
           SELECT q.ctid FROM {{t:queue}} q
            WHERE q.state = ANY ($1::text[]::{{t:state}}[])
              AND q.finished_at < now() - $2::interval
            ORDER BY q.finished_at
            LIMIT $3
              FOR UPDATE SKIP LOCKED))
  RETURNING 1) -- before 5
  RETURNING queue_name, state), -- since 5
counted AS ( -- since 5
  INSERT INTO {{t:state_count_changes}} (queue_name, state, n) -- since 5
  SELECT x.queue_name, x.state, -count(*) -- since 5
    FROM gone x -- since 5
   GROUP BY 1, 2) -- since 5
SELECT count(*) FROM gone

-- name: interval_positive
-- Whether $1 is a valid, positive PostgreSQL interval (an error when it is not an interval).
SELECT $1::interval > interval '0'

-- name: flush_queue
-- Deletes up to $2 queued messages (ready or delayed) of queue $1 through the fetch index and
-- returns how many. Running ones are left alone.
WITH gone AS (
  DELETE FROM {{t:queue}}
   WHERE ctid = ANY (ARRAY(
           SELECT q.ctid FROM {{t:queue}} q
            WHERE hashtext(q.queue_name) = hashtext($1) AND q.queue_name = $1 -- before 7
            WHERE (hashtext(q.queue_name) # (q.options ?| '{limits,concurrency_key}'::text[])::integer) IN (hashtext($1), hashtext($1) # 1) -- since 7
              AND q.queue_name = $1 -- since 7
              AND q.state = 'queued'
            LIMIT $2
              FOR UPDATE SKIP LOCKED))
  RETURNING 1)
SELECT count(*) FROM gone

-- name: missing_indexes
-- Which of the indexes a node of this release reads through ($1, schema-qualified names) do
-- not exist: a table without one of them still works, with statements that read far more.
SELECT n FROM unnest($1::text[]) AS n WHERE to_regclass(n) IS NULL

-- name: now
SELECT now()::text

-- name: set_attempt_history
-- Turns the area's attempt history on ($1 true) or off, changed_at moves only when it changes.
-- Returns the setting and when it last changed (Unix ms).
UPDATE {{t:area_settings}} s
   SET attempt_history = $1::boolean,
       changed_at = CASE WHEN s.attempt_history = $1::boolean THEN s.changed_at ELSE now() END
 WHERE s.id
RETURNING s.attempt_history, (date_part('epoch', s.changed_at) * 1000)::bigint

-- name: attempt_history_setting
SELECT s.attempt_history, (date_part('epoch', s.changed_at) * 1000)::bigint
  FROM {{t:area_settings}} s WHERE s.id

-- name: attempt_history
-- The attempts of message $1 after attempt id $2 (NULL: from the first), in attempt-id order,
-- at most $3: its records (through the message-id index: a message has few), then the attempt
-- that runs now, if it started, from its row (no record yet, no attempt id).
SELECT h.* FROM (
  SELECT a.attempt_id, a.message_id::text, a.attempt, a.queue_name, a.task_name, a.node_id,
         (date_part('epoch', a.started_at) * 1000)::bigint,
         (date_part('epoch', a.finished_at) * 1000)::bigint, a.outcome, a.error_type,
         a.error_text,
         (date_part('epoch', a.finished_at - a.started_at) * 1000)::bigint
    FROM {{t:attempts}} a
   WHERE a.message_id = $1::uuid AND a.attempt_id > coalesce($2::bigint, 0)
  UNION ALL
  SELECT NULL, q.message_id::text, q.attempts, q.queue_name, q.task_name, q.owner_node,
         (date_part('epoch', q.started_at) * 1000)::bigint, NULL, NULL, NULL, NULL, NULL
    FROM {{t:queue}} q
   WHERE q.message_id = $1::uuid AND q.state = 'running' AND q.started_at IS NOT NULL
     AND (SELECT s.attempt_history FROM {{t:area_settings}} s)) h
 ORDER BY h.attempt_id NULLS LAST
 LIMIT $3

-- name: purge_attempts
-- Deletes up to $2 attempt records that started before clock_timestamp() minus the interval
-- $1 (incomplete ones too), and returns how many. Reads the start's block range index.
WITH gone AS (
  DELETE FROM {{t:attempts}}
   WHERE ctid = ANY (ARRAY(
           SELECT a.ctid FROM {{t:attempts}} a
            WHERE a.started_at < clock_timestamp() - $1::interval
            LIMIT $2))
  RETURNING 1)
SELECT count(*) FROM gone
