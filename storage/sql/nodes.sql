-- Statements on the nodes registry and node liveness.

-- name: register_node
-- Registers a node (from migration 9 on with the task names it registered, $6) and takes its
-- liveness lock in the same statement, so no other node can see the row without the lock held. Runs on the node's listener connection, which keeps the lock.
WITH n AS (
  INSERT INTO {{t:nodes}} (name, host, pid, queues) -- before 9
  VALUES ($1, $2, $3, $4::text[]) -- before 9
  INSERT INTO {{t:nodes}} (name, host, pid, queues, tasks) -- since 9
  VALUES ($1, $2, $3, $4::text[], $6::text[]) -- since 9
  RETURNING node_id)
SELECT n.node_id, pg_advisory_lock($5::integer, n.node_id)::text FROM n

-- name: reregister_node
-- After the listener reconnects: take the node's lock again and restore its row if a janitor
-- removed it meanwhile (its messages were then recovered, and their late completions are
-- refused). Inserts a row (one affected row) exactly when the node had been declared dead.
-- From migration 9 on, $7 holds the node's task names.
WITH l AS (SELECT pg_advisory_lock($5::integer, $6::integer))
INSERT INTO {{t:nodes}} (node_id, name, host, pid, queues) OVERRIDING SYSTEM VALUE -- before 9
SELECT $6, $1, $2, $3, $4::text[] FROM l -- before 9
INSERT INTO {{t:nodes}} (node_id, name, host, pid, queues, tasks) OVERRIDING SYSTEM VALUE -- since 9
SELECT $6, $1, $2, $3, $4::text[], $7::text[] FROM l -- since 9
ON CONFLICT (node_id) DO NOTHING

-- name: holds_node_lock
-- Whether this session holds node $2's liveness lock (lock class $1): the listener asks every
-- second, so that a lock lost without an error on its connection is noticed too.
SELECT EXISTS (SELECT 1 FROM pg_locks l
                WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 2
                  AND l.pid = pg_backend_pid()
                  AND l.classid = $1::integer::oid AND l.objid = $2::integer::oid)

-- name: deregister_node
-- Graceful exit: the node's row goes, and its lock goes with the connection.
DELETE FROM {{t:nodes}} WHERE node_id = $1

-- name: listener_idle_timeout
-- A listener's session must never end for being idle: it holds the node's liveness lock.
-- (idle_session_timeout exists from PostgreSQL 14 on, and older servers skip this statement.)
SELECT set_config('idle_session_timeout', '0', false)

-- name: listener_lock_timeout
-- Taking a node's lock back after a reconnect may wait for the old session to be noticed as
-- gone: the wait is bounded, so that a stop request is never stuck behind it.
SELECT set_config('lock_timeout', '5s', false)

-- name: list_nodes
-- Every registered node, and whether it holds its liveness lock (lock class $1, key node_id)
-- now: a two-key advisory lock shows in pg_locks as classid, objid and objsubid 2. Then the
-- messages it holds that it started and that it claimed but has not started (read through the
-- index of running rows by owner).
SELECT n.node_id, n.name, n.host, n.pid, n.queues::text,
       (date_part('epoch', n.started_at) * 1000)::bigint,
       EXISTS (SELECT 1 FROM pg_locks l
                WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 2
                  AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
                  AND l.classid = $1::integer::oid AND l.objid = n.node_id::oid),
       h.started, h.held - h.started
  FROM {{t:nodes}} n
  CROSS JOIN LATERAL (SELECT count(*) AS held, count(q.started_at) AS started
                        FROM {{t:queue}} q
                       WHERE q.state = 'running' AND q.owner_node = n.node_id) h
 ORDER BY n.node_id

-- name: reap_dead_nodes
-- One janitor pass. A node whose liveness lock is free (lock class $1) is first marked suspect,
-- if its lock is still free once the grace period ($2 ms) has passed since then, it is dead: its
-- row goes, and every message it held goes back to its queue (so does a running message whose
-- owner has no row at all). A message it had started (started_at written) used an attempt: it
-- is due at once, with a failure record that says the attempt was lost. One it had claimed but
-- not started goes back as if never claimed (its eta, its attempt taken back). One whose
-- cancel was requested is cancelled instead. Every message recovered is marked confirm_start:
-- its node may have started it without writing the start yet (that write waits a second), so
-- its next start is written before its task runs, and a task that ends its process is counted.
-- The grace lets a live node's listener reconnect after a
-- database restart without its running tasks being handed to other nodes. Returns the counts
-- and the queues that got messages back, and wakes each of those queues (channel $3) on every
-- node.
WITH live AS (
  SELECT n.node_id FROM {{t:nodes}} n
    JOIN pg_locks l ON l.locktype = 'advisory' AND l.granted AND l.objsubid = 2
                   AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
                   AND l.classid = $1::integer::oid AND l.objid = n.node_id::oid),
cleared AS (
  UPDATE {{t:nodes}} SET lock_lost_at = NULL
   WHERE lock_lost_at IS NOT NULL AND node_id IN (SELECT node_id FROM live)
  RETURNING node_id),
suspect AS (
  UPDATE {{t:nodes}} SET lock_lost_at = now()
   WHERE lock_lost_at IS NULL AND node_id NOT IN (SELECT node_id FROM live)
  RETURNING node_id),
dead AS (
  DELETE FROM {{t:nodes}}
   WHERE lock_lost_at < now() - $2::bigint * interval '1 millisecond'
     AND node_id NOT IN (SELECT node_id FROM live)
  RETURNING node_id),
kept AS (
  SELECT node_id FROM {{t:nodes}}
   WHERE node_id NOT IN (SELECT node_id FROM dead)),
recovered AS (
  UPDATE {{t:queue}} q
     SET state = 'queued', -- before 5
     SET state = CASE WHEN q.cancel_requested THEN 'cancelled' -- since 5
                      ELSE 'queued' END::{{t:state}}, -- since 5
         finished_at = CASE WHEN q.cancel_requested THEN now() END, -- since 5
         owner_node = NULL,
         confirm_start = true, -- since 5
         attempts = CASE WHEN q.started_at IS NULL THEN greatest(q.attempts - 1, 0)
                         ELSE q.attempts END,
         eta = CASE WHEN q.started_at IS NULL THEN q.eta ELSE now() END,
         error = CASE WHEN q.started_at IS NULL THEN q.error
                      ELSE jsonb_build_object(
                             'type', 'troupe::attempt_lost',
                             'text', format('node %s ended while attempt %s ran (started at %s)',
                                            q.owner_node, q.attempts, q.started_at),
                             'time', to_char(now() AT TIME ZONE 'UTC',
                                             'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'),
                             'node', q.owner_node, -- since 5
                             'attempt', q.attempts) END
   WHERE q.state = 'running'
     AND (q.owner_node IS NULL OR q.owner_node NOT IN (SELECT node_id FROM kept))
  RETURNING q.queue_name) -- before 5
  RETURNING q.queue_name, q.message_id, q.attempts, q.task_name, q.started_at, q.error, -- since 5
            q.state), -- since 5
-- With attempt history on (migration 5), each attempt lost with its node gets its record:
-- started, never finished (shown as incomplete).
lost AS ( -- since 5
  INSERT INTO {{t:attempts}} (message_id, attempt, queue_name, task_name, node_id, started_at) -- since 5
  SELECT r.message_id, r.attempts, r.queue_name, r.task_name, (r.error->>'node')::integer, -- since 5
         r.started_at -- since 5
    FROM recovered r -- since 5
   WHERE r.started_at IS NOT NULL -- since 5
     AND (SELECT s.attempt_history FROM {{t:area_settings}} s)), -- since 5
counted AS ( -- since 5
  INSERT INTO {{t:state_count_changes}} (queue_name, state, n) -- since 5
  SELECT x.queue_name, x.state, count(*) -- since 5
    FROM recovered x WHERE x.state = 'cancelled' -- since 5
   GROUP BY 1, 2) -- since 5
SELECT (SELECT count(*) FROM dead), (SELECT count(*) FROM recovered),
       coalesce((SELECT array_agg(DISTINCT queue_name) FROM recovered), '{}')::text,
       (SELECT count(*) FROM suspect), (SELECT count(*) FROM cleared),
       (SELECT count(*) FROM (SELECT pg_notify($3, d.queue_name)
                                FROM (SELECT DISTINCT queue_name FROM recovered) d) n)
