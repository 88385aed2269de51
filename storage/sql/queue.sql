-- Statements on the queue table. Each "-- name:" header starts one statement, the name is its
-- prepared-statement name, its log field and its metric label. {{t:X}} is the area's quoted,
-- prefixed table or type, every value is a bound parameter. No statement ends with a semicolon.

-- name: enqueue_messages
-- Inserts one or many messages in one statement (the arrays are parallel, one entry per message)
-- and wakes each distinct queue once: PostgreSQL folds identical notifications of a transaction,
-- and the DISTINCT keeps a 1,000-row batch to one pg_notify call per queue. Re-enqueueing an
-- existing id puts it back in the queue unless it was cancelled, or when $10 is false (a retry
-- of a publish whose reply was lost must not revive a message that already ran). eta is the
-- server's clock at the publish plus the delay: clock_timestamp(), read once per statement, since
-- inside a caller's long transaction now() would be the transaction's start.
-- The same text at every schema version (transactional publishes and the producer pool do not
-- know the area's version): from migration 5 on, a re-sent row that was done or failed leaves
-- its count, and its old result's expiry, through the queue table's trigger queue_requeued.
WITH ins AS (
  INSERT INTO {{t:queue}} AS q
         (message_id, queue_name, task_name, args, options, priority, eta, enqueued_at)
  SELECT m.id, m.queue, m.task, m.args, m.options, m.priority,
         (SELECT clock_timestamp()) + m.delay_ms * interval '1 millisecond',
         to_timestamp(m.ts_ms / 1000.0)
    FROM unnest($1::uuid[], $2::text[], $3::text[], $4::jsonb[], $5::jsonb[], $6::integer[],
                $7::bigint[], $8::bigint[])
         AS m(id, queue, task, args, options, priority, delay_ms, ts_ms)
  ON CONFLICT (message_id) DO UPDATE
     SET queue_name = excluded.queue_name, task_name = excluded.task_name,
         args = excluded.args, options = excluded.options, priority = excluded.priority,
         eta = excluded.eta, state = 'queued', owner_node = NULL, started_at = NULL,
         finished_at = NULL, result = NULL, error = NULL
   WHERE q.state <> 'cancelled' AND $10::boolean
  RETURNING q.queue_name)
SELECT (SELECT count(*) FROM ins),
       (SELECT count(*) FROM (SELECT pg_notify($9, d.queue_name)
                                FROM (SELECT DISTINCT queue_name FROM ins) d) n)

-- name: insert_messages
-- enqueue_messages for the common case of new ids only, without the cost of ON CONFLICT: a
-- plain multi-row insert (same parameters, without $10). Publishers on their own connection
-- run it in autocommit first, and fall back to enqueue_messages when it fails with a unique
-- violation (an id sent again).
WITH ins AS (
  INSERT INTO {{t:queue}}
         (message_id, queue_name, task_name, args, options, priority, eta, enqueued_at)
  SELECT m.id, m.queue, m.task, m.args, m.options, m.priority,
         (SELECT clock_timestamp()) + m.delay_ms * interval '1 millisecond',
         to_timestamp(m.ts_ms / 1000.0)
    FROM unnest($1::uuid[], $2::text[], $3::text[], $4::jsonb[], $5::jsonb[], $6::integer[],
                $7::bigint[], $8::bigint[])
         AS m(id, queue, task, args, options, priority, delay_ms, ts_ms)
  RETURNING queue_name)
SELECT (SELECT count(*) FROM ins),
       (SELECT count(*) FROM (SELECT pg_notify($9, d.queue_name)
                                FROM (SELECT DISTINCT queue_name FROM ins) d) n)

-- name: copy_messages
-- The bulk form of insert_messages: a binary COPY of new messages without a delay (eta and
-- state take their defaults). Publishers on their own connection run it inside a transaction
-- that also notifies each queue once (storage/queries.cpp, copy_new_messages), for batches
-- large enough that parsing arrays of text would cost more than the extra round trips. A
-- unique violation (an id sent again) rolls it back, and the publisher falls back to
-- enqueue_messages.
COPY {{t:queue}} (message_id, queue_name, task_name, args, options, priority, enqueued_at)
FROM STDIN (FORMAT binary)

-- name: claim_batch
-- Claims up to $3 ready messages of queue $1 for node $2, as many as the consumer has free slots,
-- in one statement. The inner SELECT walks the partial fetch index in claim order (priority,
-- eta, id: priority holds across the whole queue) and skips rows that other nodes are claiming.
-- The index leads with hashtext(queue_name), so every statement that walks it names the hash
-- (for the index) and the name (for another queue whose name has the same hash).
-- The UPDATE finds the rows it locked by their physical address ("ctid = ANY (ARRAY(...))", a
-- TID scan): a tenth faster than looking each id up in the primary key, and sound within the
-- statement, since a row locked here cannot move before it is updated. A row whose newest
-- version this statement cannot see (changed by a transaction that committed after the
-- statement began) is left alone by the TID scan and stays queued for the next claim.
-- attempts + 1 with owner_node is the delivery token every completion is checked against. It
-- stops at 1,000,000,000, the bound migration 4 puts on attempts, so a claim never overflows.
-- started_at is cleared: the delivery has not started yet (its node writes the start, see
-- mark_started). So are a cancel request and a progress left by a delivery before a re-send
-- (a queued row holds a cancel request only then: a cancel cancels a queued row at once). A paused queue (a queue_control row) gives nothing, this one-statement form
-- reads the pause on its snapshot (the two-step claim below waits for a pause in progress).
-- The last two columns say whether the row came back from a dead node (its start is written
-- before its task runs) and whether its last attempt was lost with its node (it counts against
-- max_retries, see the retries middleware).
-- The timestamp comes back through date_part (a float8), not extract (a numeric, which took a
-- tenth of the statement's time): enqueue times are whole milliseconds, well within a float8's
-- precision.
UPDATE {{t:queue}}
   SET state = 'running', owner_node = $2, attempts = least(attempts + 1, 1000000000),
       cancel_requested = false, progress = NULL, -- since 5
       started_at = NULL
 WHERE ctid = ANY (ARRAY(
         SELECT ctid FROM {{t:queue}}
          WHERE hashtext(queue_name) = hashtext($1) AND queue_name = $1 -- before 7
          WHERE (hashtext(queue_name) # (options ?| '{limits,concurrency_key}'::text[])::integer) = hashtext($1) -- since 7
            AND queue_name = $1 -- since 7
            AND state = 'queued' AND eta <= now()
            AND NOT EXISTS (SELECT FROM {{t:queue_control}} c -- since 5
                             WHERE c.queue_name = $1 AND c.paused) -- since 5
          ORDER BY priority, eta, message_id
          LIMIT $3
            FOR UPDATE SKIP LOCKED))
   AND (SELECT set_config('synchronous_commit', 'off', true)) IS NOT NULL
RETURNING message_id::text, task_name, args::text, options::text, attempts, priority,
          (date_part('epoch', enqueued_at) * 1000)::bigint, (date_part('epoch', eta) * 1000)::bigint,
          false, false -- before 5
          confirm_start, coalesce(error->>'type' = 'troupe::attempt_lost', false) -- since 5

-- name: claim_lock
-- The first step of a claim in two steps (inside a transaction the caller began): locks up to
-- $2 ready messages of queue $1 in claim order, skipping rows other nodes are claiming, and
-- returns them with the attempt this delivery will be. A row lock is enough to start their
-- tasks: no other claim can take the rows, and nothing can change them until the transaction
-- ends. A row lock writes the row's lock marker (and its WAL record) but no new row version
-- and no index entries: the rows come in about half the time of the one-statement claim,
-- whose UPDATE ... RETURNING sends them only once every new version is written.
-- The first column is the row's address for claim_mark. ORDER BY names the table's columns
-- through its alias: a bare message_id would be the text output column of that name, which
-- the fetch index cannot give in order (every ready row would be read and sorted).
-- A paused queue gives nothing. The caller runs claim_pause_gate first, in the same
-- transaction: a pause in progress holds that lock exclusively until it commits, so this
-- statement's snapshot, taken after the lock, sees every pause that committed before.
SELECT q.ctid::text, q.message_id::text, q.task_name, q.args::text, q.options::text,
       least(q.attempts + 1, 1000000000), q.priority,
       (date_part('epoch', q.enqueued_at) * 1000)::bigint,
       (date_part('epoch', q.eta) * 1000)::bigint,
       false, false -- before 5
       q.confirm_start, coalesce(q.error->>'type' = 'troupe::attempt_lost', false) -- since 5
  FROM {{t:queue}} q
 WHERE hashtext(q.queue_name) = hashtext($1) AND q.queue_name = $1 -- before 7
 WHERE (hashtext(q.queue_name) # (q.options ?| '{limits,concurrency_key}'::text[])::integer) = hashtext($1) AND q.queue_name = $1 -- since 7
   AND q.state = 'queued' AND q.eta <= now()
   AND NOT EXISTS (SELECT FROM {{t:queue_control}} c -- since 5
                    WHERE c.queue_name = $1 AND c.paused) -- since 5
 ORDER BY q.priority, q.eta, q.message_id
 LIMIT $2 -- before 7
 LIMIT greatest($2 - coalesce(nullif(current_setting('troupe.limited_taken', true), '')::integer, 0), 0) -- since 7
   FOR UPDATE OF q SKIP LOCKED

-- name: claim_limited_lock
-- From migration 7 on, the first step of a claim starts with this one, in the same
-- transaction and round trip: it locks up to $3 ready messages under limits of queue $1 (as
-- many as their limits let start now, for the node's idle executors only, so that a slot is
-- never held by a message waiting in a node's prefetch) for node $2, taking their slots in
-- this transaction (claim_limited), and returns them as claim_lock does. claim_lock then takes
-- the queue's other messages for the rest of what the claim asks (claim_limited leaves how
-- many it took in the transaction's setting troupe.limited_taken). A queue without a ready
-- message under limits never calls the function: the EXISTS probe (one look at the fetch
-- index's range of such messages) gates it, so other queues pay one index probe per claim.
SELECT l.* FROM {{t:claim_limited}}($1::text, $2::integer, $3::integer) l
 WHERE EXISTS (SELECT FROM {{t:queue}} z
                WHERE (hashtext(z.queue_name) # (z.options ?| '{limits,concurrency_key}'::text[])::integer)
                      = (hashtext($1) # 1)
                  AND z.queue_name = $1 AND z.state = 'queued' AND z.eta <= now())

-- name: claim_mark
-- The second step: marks the rows claim_lock locked (by address, $1) running for node $2, in
-- the same transaction, and commits without waiting for the WAL flush. The rows cannot have
-- moved: this transaction holds their locks. Returns one row per row marked. The rows of $3
-- (the first ones in claim order, as many as the node has idle executors) started as soon as
-- they were locked: their start is written now. The others wait, prefetched, and their node
-- writes their start later (mark_started, or with their outcome). From migration 8 on, a
-- message taken under limits starts at the instant its limits counted it (limit_take leaves
-- it in the setting troupe.limited_starts).
UPDATE {{t:queue}}
   SET state = 'running', owner_node = $2, attempts = least(attempts + 1, 1000000000),
       cancel_requested = false, progress = NULL, -- since 5
       started_at = CASE WHEN ctid = ANY ($3::tid[]) THEN now() END -- before 8
       started_at = CASE WHEN ctid = ANY ($3::tid[]) -- since 8
                         THEN coalesce((nullif(current_setting('troupe.limited_starts', true), '')::jsonb -- since 8
                                        ->> message_id::text)::timestamptz, now()) END -- since 8
 WHERE ctid = ANY ($1::tid[]) AND state = 'queued'
   AND (SELECT set_config('synchronous_commit', 'off', true)) IS NOT NULL

-- name: next_eta
-- Milliseconds until the earliest delayed message of queue $1 becomes ready, or NULL. A skip
-- scan over the fetch index: one probe per distinct priority, never a walk over the backlog.
-- From migration 7 on, the messages under limits count too (the first 1,000 of them in claim
-- order): a ready one that its limits hold back asks for another claim within a second, the
-- poll behind the wake that a freed slot sends.
WITH RECURSIVE p AS (
  (SELECT priority FROM {{t:queue}}
    WHERE hashtext(queue_name) = hashtext($1) AND queue_name = $1 AND state = 'queued' -- before 7
    WHERE (hashtext(queue_name) # (options ?| '{limits,concurrency_key}'::text[])::integer) = hashtext($1) -- since 7
      AND queue_name = $1 AND state = 'queued' -- since 7
    ORDER BY priority LIMIT 1)
  UNION ALL
  SELECT (SELECT q.priority FROM {{t:queue}} q
           WHERE hashtext(q.queue_name) = hashtext($1) AND q.queue_name = $1 -- before 7
           WHERE (hashtext(q.queue_name) # (q.options ?| '{limits,concurrency_key}'::text[])::integer) = hashtext($1) AND q.queue_name = $1 -- since 7
             AND q.state = 'queued' AND q.priority > p.priority
           ORDER BY q.priority LIMIT 1)
    FROM p WHERE p.priority IS NOT NULL)
SELECT ceil(extract(epoch FROM min(e.eta) - now()) * 1000)::bigint -- before 7
SELECT least(ceil(extract(epoch FROM min(e.eta) - now()) * 1000)::bigint, -- since 7
             (SELECT CASE WHEN bool_or(l.eta <= now()) THEN 1000 -- since 7
                          ELSE ceil(extract(epoch FROM min(l.eta) - now()) * 1000)::bigint END -- since 7
                FROM (SELECT q.eta FROM {{t:queue}} q -- since 7
                       WHERE (hashtext(q.queue_name) # (q.options ?| '{limits,concurrency_key}'::text[])::integer) = (hashtext($1) # 1) -- since 7
                         AND q.queue_name = $1 AND q.state = 'queued' -- since 7
                       ORDER BY q.priority, q.eta, q.message_id LIMIT 1000) l)) -- since 7
  FROM p CROSS JOIN LATERAL (
         SELECT q.eta FROM {{t:queue}} q
          WHERE hashtext(q.queue_name) = hashtext($1) AND q.queue_name = $1 -- before 7
          WHERE (hashtext(q.queue_name) # (q.options ?| '{limits,concurrency_key}'::text[])::integer) = hashtext($1) AND q.queue_name = $1 -- since 7
            AND q.state = 'queued' AND q.priority = p.priority
            AND q.eta > now()
          ORDER BY q.eta LIMIT 1) e
 WHERE p.priority IS NOT NULL

-- name: complete_batch
-- Writes many outcomes in one statement. Each row is written only while node $1 still owns the
-- delivery ($3 = attempts of that claim): a node that lost its claim (recovered elsewhere, or
-- abandoned) can never overwrite a newer delivery. Returns the ids that were written. When a
-- written row holds a result or a failure, one notification on the results channel ($8) wakes
-- result waiters (none for plain successes, which nobody waits for).
-- The rows are found by primary key ("= ANY" of the ids: the planner estimates one row per id
-- from the key's uniqueness), and the node and state conditions are join conditions against
-- the outcomes (they come as columns of them), so that no statistics about running rows can
-- change the plan. As conditions on the row, they let the planner read every running row of
-- the node through its partial index: a cost that grew with the node's backlog (36 us per
-- outcome at 21k messages/s, against 11 us this way), or, when statistics said no row was
-- running, rescan the outcomes once per running row (300 ms for 500 outcomes). The queue
-- suite checks that the outcomes are read once.
-- A retry of a message whose cancel was requested is cancelled instead ("its next start is
-- cancelled"). $9 is how long each attempt ran (ms, negative for one that never started): an
-- attempt that ended before its node wrote its start gets started_at from it. $10 is the
-- progress each task reported last and its node had not written (NULL: the row's stays). $11
-- is each result's lifetime (ms, 0: for ever).
WITH written AS (
UPDATE {{t:queue}} q
   SET state = c.state::{{t:state}}, -- before 5
       finished_at = CASE WHEN c.state = 'queued' THEN NULL ELSE now() END, -- before 5
   SET state = CASE WHEN c.state = 'queued' AND q.cancel_requested THEN 'cancelled' -- since 5
                    ELSE c.state END::{{t:state}}, -- since 5
       finished_at = CASE WHEN c.state = 'queued' AND NOT q.cancel_requested THEN NULL -- since 5
                          ELSE now() END, -- since 5
       owner_node = NULL,
       attempts = CASE WHEN c.ran_ms < 0 THEN greatest(q.attempts - 1, 0) ELSE q.attempts END,
       started_at = CASE WHEN c.ran_ms < 0 THEN q.started_at
                         ELSE coalesce(q.started_at, now() - c.ran_ms * interval '1 millisecond')
                    END,
       eta = CASE WHEN c.state = 'queued' THEN now() + c.retry_ms * interval '1 millisecond'
                  ELSE q.eta END,
       progress = coalesce(c.progress, q.progress), -- since 5
       result_expires_at = CASE WHEN c.result IS NOT NULL AND c.ttl_ms > 0 -- since 5
                                THEN now() + c.ttl_ms * interval '1 millisecond' END, -- since 5
       result = c.result,
       error = c.error
  FROM unnest($2::uuid[], $3::integer[], $4::text[], $5::jsonb[], $6::jsonb[], $7::bigint[],
              $9::bigint[],
              $10::jsonb[], $11::bigint[], -- since 5
              array_fill($1::integer, ARRAY[cardinality($2::uuid[])]),
              array_fill('running'::{{t:state}}, ARRAY[cardinality($2::uuid[])]))
       AS c(id, attempt, state, result, error, retry_ms, ran_ms, owner, running) -- before 5
       AS c(id, attempt, state, result, error, retry_ms, ran_ms, progress, ttl_ms, owner, -- since 5
            running) -- since 5
 WHERE q.message_id = ANY ($2::uuid[])
   AND q.message_id = c.id AND q.owner_node = c.owner AND q.attempts = c.attempt
   AND q.state = c.running
RETURNING q.message_id,
          (q.result IS NOT NULL OR q.error IS NOT NULL OR q.state = 'cancelled') AS interesting), -- before 5
          (q.result IS NOT NULL OR q.error IS NOT NULL OR q.state = 'cancelled') AS interesting, -- since 5
          c.attempt, c.state AS outcome, c.ran_ms, q.queue_name, q.task_name, q.started_at, -- since 5
          q.error AS error, coalesce(q.error->>'skipped', '') = 'true' AS skipped, -- since 5
          q.state AS row_state), -- since 5
-- Each finished row adds one to its queue's count of its state (state_counts).
counted AS ( -- since 5
  INSERT INTO {{t:state_count_changes}} (queue_name, state, n) -- since 5
  SELECT x.queue_name, x.row_state, count(*) -- since 5
    FROM written x WHERE x.row_state <> 'queued' -- since 5
   GROUP BY 1, 2), -- since 5
-- With attempt history on, each attempt that started gets its record (a skip by the age limit
-- has none): one plain insert per attempt, in this statement. An attempt still running has
-- none yet (its row shows it), one lost with its node gets it from reap_dead_nodes.
history AS ( -- since 5
  INSERT INTO {{t:attempts}} (message_id, attempt, queue_name, task_name, node_id, -- since 5
                             started_at, finished_at, outcome, error_type, error_text) -- since 5
  SELECT w.message_id, w.attempt, w.queue_name, w.task_name, $1, w.started_at, now(), -- since 5
         CASE w.outcome WHEN 'done' THEN 'success' WHEN 'cancelled' THEN 'cancelled' -- since 5
              ELSE 'failure' END, -- since 5
         w.error->>'type', left(w.error->>'text', 2000) -- since 5
    FROM written w -- since 5
   WHERE w.ran_ms >= 0 AND NOT w.skipped AND w.started_at IS NOT NULL -- since 5
     AND (SELECT s.attempt_history FROM {{t:area_settings}} s)), -- since 5
woken AS (
  SELECT pg_notify($8, '') WHERE EXISTS (SELECT 1 FROM written WHERE interesting))
SELECT w.message_id::text FROM written w CROSS JOIN (SELECT count(*) FROM woken) n

-- name: release_claimed
-- Returns claimed messages that never started (prefetched at shutdown or at a pause) to the
-- queue, as if they had not been claimed: same eta, the claim's attempt taken back. Each queue
-- that got rows back is woken (channel $4), so that other nodes start them now, not at their
-- next poll. A message whose cancel was requested is cancelled instead, and result waiters
-- are woken (channel $5).
WITH back AS (
  UPDATE {{t:queue}} q
     SET state = 'queued', -- before 5
     SET state = CASE WHEN q.cancel_requested THEN 'cancelled' -- since 5
                      ELSE 'queued' END::{{t:state}}, -- since 5
         finished_at = CASE WHEN q.cancel_requested THEN now() END, -- since 5
         owner_node = NULL, attempts = greatest(q.attempts - 1, 0),
         started_at = NULL
    FROM unnest($2::uuid[], $3::integer[]) AS c(id, attempt)
   WHERE q.message_id = c.id AND q.owner_node = $1 AND q.attempts = c.attempt
     AND q.state = 'running'
  RETURNING q.queue_name, q.state = 'cancelled' AS cancelled) -- before 5
  RETURNING q.queue_name, q.state = 'cancelled' AS cancelled), -- since 5
counted AS ( -- since 5
  INSERT INTO {{t:state_count_changes}} (queue_name, state, n) -- since 5
  SELECT x.queue_name, 'cancelled'::{{t:state}}, count(*) -- since 5
    FROM back x WHERE x.cancelled -- since 5
   GROUP BY 1, 2) -- since 5
SELECT (SELECT count(*) FROM back WHERE NOT cancelled),
       (SELECT count(*) FROM (SELECT pg_notify($4, d.queue_name)
                                FROM (SELECT DISTINCT queue_name FROM back
                                       WHERE NOT cancelled) d) n),
       (SELECT count(*) FROM (SELECT pg_notify($5, '')
                               WHERE EXISTS (SELECT FROM back WHERE cancelled)) r)

-- name: recover_unheld
-- After a claim whose outcome is unknown (the connection broke while it ran), node $1's consumer
-- of queue $2 hands back every row it owns but does not hold ($3), as if never claimed. The
-- queue is woken (channel $4) when rows went back.
-- A message whose cancel was requested is cancelled instead.
WITH back AS (
  UPDATE {{t:queue}}
     SET state = 'queued', -- before 5
     SET state = CASE WHEN cancel_requested THEN 'cancelled' ELSE 'queued' END::{{t:state}}, -- since 5
         finished_at = CASE WHEN cancel_requested THEN now() END, -- since 5
         owner_node = NULL, attempts = greatest(attempts - 1, 0),
         started_at = NULL
   WHERE state = 'running' AND owner_node = $1 AND queue_name = $2
     AND message_id <> ALL ($3::uuid[])
  RETURNING 1) -- before 5
  RETURNING queue_name, state), -- since 5
counted AS ( -- since 5
  INSERT INTO {{t:state_count_changes}} (queue_name, state, n) -- since 5
  SELECT x.queue_name, x.state, count(*) -- since 5
    FROM back x WHERE x.state = 'cancelled' -- since 5
   GROUP BY 1, 2) -- since 5
SELECT (SELECT count(*) FROM back),
       (SELECT count(*) FROM (SELECT pg_notify($4, $2) WHERE EXISTS (SELECT 1 FROM back)) n)

-- name: committed_claims
-- Of messages $2 (at attempts $3) that node $1 started from a claim whose commit is unknown (the
-- connection broke while it ended), those the claim committed: running, owned by the node, at
-- that attempt. $2 holds every message of the claim (started or not): FOR UPDATE waits for the
-- claim's transaction when it is still ending, and then reads the rows as it left them. The
-- lock is a materialized CTE, so that no condition on the rows' state is checked on the
-- statement's snapshot (before the wait, where a row still being claimed reads as queued).
WITH s AS MATERIALIZED (
  SELECT q.message_id, q.state, q.owner_node, q.attempts
    FROM {{t:queue}} q
   WHERE q.message_id = ANY ($2::uuid[])
     FOR UPDATE)
SELECT s.message_id::text
  FROM s JOIN unnest($2::uuid[], $3::integer[]) AS c(id, attempt) ON c.id = s.message_id
 WHERE s.state = 'running' AND s.owner_node = $1 AND s.attempts = c.attempt

-- name: queue_dead_rows
-- Dead and live row versions of the queue table as PostgreSQL's statistics count them (they
-- lag the truth by up to a few seconds), and whether this role may vacuum it: PostgreSQL lets
-- the table's owner and the database's owner (or a member of either role, or a superuser) do
-- it, and only warns when anyone else tries.
SELECT coalesce(s.n_dead_tup, 0), coalesce(s.n_live_tup, 0),
       pg_has_role(c.relowner, 'USAGE') OR pg_has_role(d.datdba, 'USAGE')
  FROM pg_class c
  JOIN pg_database d ON d.datname = current_database()
  LEFT JOIN pg_stat_user_tables s ON s.relid = c.oid
 WHERE c.oid = '{{t:queue}}'::regclass

-- name: vacuum_queue
-- Removes dead row versions from the queue table and its indexes. INDEX_CLEANUP ON: the fetch
-- index's dead entries are the point, even when few heap pages hold dead rows. TRUNCATE OFF:
-- truncating would take a lock that blocks claims. SKIP_LOCKED: when another vacuum of the
-- table runs, this one gives way at once. Sent as plain SQL (it cannot be prepared), between
-- vacuum_timeout and vacuum_timeout_reset: a node that stops waits for it, 30 s at most.
VACUUM (INDEX_CLEANUP ON, TRUNCATE OFF, SKIP_LOCKED) {{t:queue}}

-- name: vacuum_timeout
-- The session's statement_timeout before the vacuum's (a node sets one), to be restored after.
SELECT current_setting('statement_timeout'), set_config('statement_timeout', '30s', false)

-- name: vacuum_timeout_reset
SELECT set_config('statement_timeout', $1, false)

-- name: queue_stats
-- Per queue: counts per state, ready (queued and due), scheduled (queued, not yet due) and the
-- age of the oldest ready message. NULL $1 means every queue that has rows.
SELECT queue_name,
       count(*) FILTER (WHERE state = 'queued'),
       count(*) FILTER (WHERE state = 'running'),
       count(*) FILTER (WHERE state = 'done'),
       count(*) FILTER (WHERE state = 'failed'),
       count(*) FILTER (WHERE state = 'cancelled'),
       count(*) FILTER (WHERE state = 'queued' AND eta <= now()),
       count(*) FILTER (WHERE state = 'queued' AND eta > now()),
       coalesce(extract(epoch FROM now() - min(eta) FILTER (WHERE state = 'queued'
                                                              AND eta <= now())), 0)::float8
  FROM {{t:queue}}
 WHERE $1::text IS NULL OR queue_name = $1
 GROUP BY queue_name
 ORDER BY queue_name

-- name: queue_stats_counted
-- queue_stats from migration 5 on, at a cost that does not grow with the finished rows kept:
-- the live states are counted through their partial indexes (fetch and running), the
-- finished ones read from state_counts plus the changes not yet added to it. A queue whose
-- counts are all zero is left out.
WITH queued AS (
  SELECT q.queue_name, count(*) AS queued,
         count(*) FILTER (WHERE q.eta <= now()) AS ready,
         count(*) FILTER (WHERE q.eta > now()) AS scheduled,
         min(q.eta) FILTER (WHERE q.eta <= now()) AS oldest
    FROM {{t:queue}} q
   WHERE q.state = 'queued'
     AND ($1::text IS NULL OR (hashtext(q.queue_name) = hashtext($1) AND q.queue_name = $1)) -- before 7
     AND ($1::text IS NULL OR ((hashtext(q.queue_name) # (q.options ?| '{limits,concurrency_key}'::text[])::integer) IN (hashtext($1), hashtext($1) # 1) -- since 7
                               AND q.queue_name = $1)) -- since 7
   GROUP BY q.queue_name),
running AS (
  SELECT q.queue_name, count(*) AS running
    FROM {{t:queue}} q
   WHERE q.state = 'running' AND ($1::text IS NULL OR q.queue_name = $1)
   GROUP BY q.queue_name),
finished AS (
  SELECT f.queue_name,
         sum(f.n) FILTER (WHERE f.state = 'done') AS done,
         sum(f.n) FILTER (WHERE f.state = 'failed') AS failed,
         sum(f.n) FILTER (WHERE f.state = 'cancelled') AS cancelled
    FROM (SELECT queue_name, state, n FROM {{t:state_counts}}
          UNION ALL
          SELECT queue_name, state, n FROM {{t:state_count_changes}}) f
   WHERE $1::text IS NULL OR f.queue_name = $1
   GROUP BY f.queue_name),
every AS (
  SELECT coalesce(q.queue_name, r.queue_name, f.queue_name) AS queue_name,
         coalesce(q.queued, 0) AS queued, coalesce(r.running, 0) AS running,
         coalesce(f.done, 0) AS done, coalesce(f.failed, 0) AS failed,
         coalesce(f.cancelled, 0) AS cancelled, coalesce(q.ready, 0) AS ready,
         coalesce(q.scheduled, 0) AS scheduled, q.oldest
    FROM queued q
    FULL JOIN running r ON r.queue_name = q.queue_name
    FULL JOIN finished f ON f.queue_name = coalesce(q.queue_name, r.queue_name))
SELECT queue_name, queued, running, done::bigint, failed::bigint, cancelled::bigint, ready,
       scheduled, coalesce(extract(epoch FROM now() - oldest), 0)::float8
  FROM every
 WHERE queued + running + done + failed + cancelled > 0
 ORDER BY queue_name

-- name: fold_state_counts
-- Adds the changes to the finished counts made since the last fold to state_counts, in one
-- statement: the changes it deletes are exactly those it adds (a concurrent fold finds them
-- gone), and one being written meanwhile waits for the next. Returns how many changes.
WITH d AS (
  DELETE FROM {{t:state_count_changes}} RETURNING queue_name, state, n),
s AS (
  INSERT INTO {{t:state_counts}} AS k (queue_name, state, n)
  SELECT d.queue_name, d.state, sum(d.n) FROM d GROUP BY 1, 2 ORDER BY 1, 2
  ON CONFLICT (queue_name, state) DO UPDATE SET n = k.n + excluded.n)
SELECT count(*) FROM d

-- name: lock_state_counts
-- The first statement of a recount (in a transaction): how long its lock may wait ($1 ms).
SELECT set_config('lock_timeout', $1 || 'ms', true)

-- name: lock_state_count_changes
-- Holds off every statement that changes a finished count (they append to
-- state_count_changes) until the recount commits, once those in progress have ended.
LOCK TABLE {{t:state_count_changes}} IN EXCLUSIVE MODE

-- name: clear_state_counts
-- The second statement of a recount: every count and pending change goes.
WITH d AS (DELETE FROM {{t:state_count_changes}} RETURNING 1)
DELETE FROM {{t:state_counts}}

-- name: recount_states
-- The last statement of a recount: the counts from the rows. Returns how many (queue, state)
-- counts it wrote.
WITH c AS (
  INSERT INTO {{t:state_counts}} (queue_name, state, n)
  SELECT queue_name, state, count(*) FROM {{t:queue}}
   WHERE state IN ('done', 'failed', 'cancelled')
   GROUP BY queue_name, state
  RETURNING 1)
SELECT count(*) FROM c

-- name: read_results
-- The outcome of each message of $1 that is finished for good (done, failed or cancelled):
-- id, state, result, failure record, whether the result expired (result_ttl: its text is then
-- left out). Messages still queued or running are left out.
SELECT message_id::text, state::text, result::text, error::text, false -- before 5
SELECT message_id::text, state::text, -- since 5
       CASE WHEN result_expires_at <= now() THEN NULL ELSE result END::text, error::text, -- since 5
       coalesce(result_expires_at <= now(), false) -- since 5
  FROM {{t:queue}}
 WHERE message_id = ANY ($1::uuid[]) AND state IN ('done', 'failed', 'cancelled')

-- name: message_exists
SELECT count(*) FROM {{t:queue}} WHERE message_id = $1::uuid

-- name: claim_deduplication_keys
-- Claims deduplication keys for the messages about to be published, one row per distinct
-- (queue, key) of the call, in key order so that concurrent callers lock keys in the same order.
-- A key is taken when it is free or expired (clock_timestamp(), one reading per row), a live
-- key is left as it is and returned with its stored message. A concurrent caller holding an
-- uncommitted claim of the key makes this statement wait for its commit, then return its
-- message. $6 is this call's claim token: claimed = the key now carries it.
INSERT INTO {{t:deduplication}} AS d
       (queue_name, key, message_id, message, claimed_at, expires_at, claim_token)
SELECT k.queue, k.key, k.id, k.message, k.now, k.now + k.ttl_ms * interval '1 millisecond', $6
  FROM (SELECT u.*, clock_timestamp() AS now
          FROM unnest($1::text[], $2::text[], $3::uuid[], $4::jsonb[], $5::bigint[])
               AS u(queue, key, id, message, ttl_ms)
         ORDER BY u.queue, u.key) k
ON CONFLICT (queue_name, key) DO UPDATE
   SET message_id  = CASE WHEN d.expires_at <= excluded.claimed_at
                          THEN excluded.message_id ELSE d.message_id END,
       message     = CASE WHEN d.expires_at <= excluded.claimed_at
                          THEN excluded.message ELSE d.message END,
       expires_at  = CASE WHEN d.expires_at <= excluded.claimed_at
                          THEN excluded.expires_at ELSE d.expires_at END,
       claim_token = CASE WHEN d.expires_at <= excluded.claimed_at
                          THEN excluded.claim_token ELSE d.claim_token END,
       claimed_at  = CASE WHEN d.expires_at <= excluded.claimed_at
                          THEN excluded.claimed_at ELSE d.claimed_at END
RETURNING d.queue_name, d.key, d.claim_token = $6, d.message_id::text, d.message->>'queue',
          d.message->>'task', (d.message->'args')::text, (d.message->'options')::text,
          (d.message->>'priority')::integer, (d.message->>'delay_ms')::bigint,
          (d.message->>'timestamp_ms')::bigint

-- name: store_deduplicated_messages
-- Replaces the stored message of keys this call claimed ($4 = its claim token) with the message
-- as published, when an enqueue hook changed it after the claim ($5 = this call's claim token).
UPDATE {{t:deduplication}} d
   SET message_id = s.id, message = s.message
  FROM unnest($1::text[], $2::text[], $3::uuid[], $4::jsonb[]) AS s(queue, key, id, message)
 WHERE d.queue_name = s.queue AND d.key = s.key AND d.claim_token = $5

-- name: prune_deduplication_keys
-- Removes up to $1 expired deduplication keys and returns how many.
DELETE FROM {{t:deduplication}}
 WHERE ctid = ANY (ARRAY(SELECT ctid FROM {{t:deduplication}}
                          WHERE expires_at <= clock_timestamp()
                          ORDER BY expires_at LIMIT $1
                            FOR UPDATE SKIP LOCKED))

-- name: failed_recently
-- Per queue: messages that failed for good in the last $1 seconds, read through the finished
-- index (state, finished_at): the cost follows the recent failures, not the rows kept.
SELECT queue_name, count(*)
  FROM {{t:queue}}
 WHERE state = 'failed' AND finished_at > now() - make_interval(secs => $1::float8)
 GROUP BY queue_name
