-- Statements on the rows of groups (migration 6; callers check the area's version first).
-- Groups are written by the queue table's triggers (storage/migrations/006_compositions.sql).

-- name: read_group
-- Group $1 as its row says: state, members, how many have succeeded and failed, the first
-- failure, when it was created and finished (ms since the epoch, 0 while it runs).
SELECT g.group_id::text, g.state, g.total, g.total - g.remaining, g.failed,
       coalesce(g.error::text, ''),
       (extract(epoch FROM g.created_at) * 1000)::bigint,
       coalesce((extract(epoch FROM g.finished_at) * 1000)::bigint, 0)
  FROM {{t:groups}} g
 WHERE g.group_id = $1::uuid

-- name: purge_groups
-- Deletes up to $3 groups in state $1 (done or failed) that finished more than $2 milliseconds
-- ago, with their members, oldest first, and returns how many. A failed group with a member
-- still queued or running (which may yet succeed) is kept. Groups another transaction holds
-- are skipped.
WITH gone AS (
  DELETE FROM {{t:groups}}
   WHERE group_id = ANY (ARRAY(
           SELECT g.group_id FROM {{t:groups}} g
            WHERE g.state = $1 AND g.finished_at < now() - $2::bigint * interval '1 millisecond'
              AND NOT EXISTS (SELECT 1 FROM {{t:group_members}} m
                                JOIN {{t:queue}} q ON q.message_id = m.message_id
                               WHERE m.group_id = g.group_id AND NOT m.succeeded
                                 AND q.state IN ('queued', 'running'))
            ORDER BY g.finished_at
            LIMIT $3
              FOR UPDATE SKIP LOCKED))
  RETURNING 1)
SELECT count(*) FROM gone
