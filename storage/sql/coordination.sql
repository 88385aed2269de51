-- Statements on the coordination tables of migration 7 (docs/coordination.md). The decisions
-- are the migration's functions, which hold the key's advisory lock until the transaction
-- ends. Each statement here runs in autocommit, so a lock is held for one statement.

-- name: limit_acquire
-- A guard takes a slot of limiter $2 (scope $1: '' or a task's per-key concurrency) of kind $3
-- with capacity $4 and window $5 ms, for holder $6 on node $7 (NULL outside a node), until
-- $8 ms from now. True when it holds one.
SELECT {{t:limit_acquire}}($1, $2, $3, $4::integer, $5::bigint, $6, $7::integer, $8::bigint)

-- name: limit_release
-- A guard lets its slot go: whether it held one.
SELECT {{t:limit_release}}($1, $2, $3)

-- name: limit_holds
-- The live slots of limiter $2 in scope $1 (concurrent slots and window acquisitions), and for
-- a bucket the use of its current window.
SELECT (SELECT count(*) FROM {{t:coordination_holds}} h
         WHERE h.scope = $1 AND h.name = $2 AND h.expires_at > now()),
       coalesce((SELECT c.used FROM {{t:coordination}} c
                  WHERE $1 = '' AND c.name = $2 AND c.kind = 'bucket'
                    AND c.window_start + c.window_ms * interval '1 millisecond' > now()), 0)

-- name: barrier_create
SELECT {{t:barrier_create}}($1, $2::integer, $3::bigint)

-- name: barrier_arrive
SELECT {{t:barrier_arrive}}($1)

-- name: barrier_released
-- Whether barrier $1 is released (no row when no live barrier has the name).
SELECT c.released_at IS NOT NULL FROM {{t:coordination}} c
 WHERE c.name = $1 AND c.kind = 'barrier' AND c.expires_at > now()

-- name: purge_coordination
-- The janitor's pass: slots past their expiry (guards' TTLs, window acquisitions past their
-- window), barriers past their TTL, and limiter rows without a live slot left unused for $1 ms.
-- A key's row goes only under the key's advisory lock, tried (a key in use is left for the
-- next pass), so the pass never waits for a claim nor makes one wait. Returns how many rows
-- went.
WITH holds AS (
  DELETE FROM {{t:coordination_holds}} h WHERE h.expires_at <= now() RETURNING 1),
keys AS (
  DELETE FROM {{t:coordination}} c
   WHERE (c.kind = 'barrier' AND c.expires_at <= now())
      OR (c.kind <> 'barrier' AND c.updated_at < now() - $1::bigint * interval '1 millisecond'
          AND NOT EXISTS (SELECT FROM {{t:coordination_holds}} h
                           WHERE h.scope = '' AND h.name = c.name AND h.expires_at > now()))
     AND pg_try_advisory_xact_lock({{coordination_lock_class}}, hashtext(chr(31) || c.name))
  RETURNING 1)
SELECT (SELECT count(*) FROM holds) + (SELECT count(*) FROM keys)
