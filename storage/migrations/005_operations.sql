-- Troupe migration 5: operations. Queues can be paused, and messages cancelled.
--   queue_control        one row per queue that was ever paused or resumed: whether it is
--                        paused now, and since when. A queue without a row is not paused. Every
--                        claim reads it, so nothing is claimed once a pause has committed.
--   cancel_requested     set by a cancel: a queued message is cancelled at once; a running one
--                        is stopped by its node before it starts, or its task is told; a
--                        delivery of it that fails, or that a node hands back, is cancelled
--                        instead of queued again.
--   progress             what a running task last reported of its progress (a number or JSON).
-- Adding the two columns changes only the table's description (their defaults are constants):
-- it takes the queue table's strongest lock for a moment, once every transaction already using
-- the table has ended, and rewrites nothing.
CREATE TABLE IF NOT EXISTS {{t:queue_control}} (
  queue_name text        PRIMARY KEY CHECK (octet_length(queue_name) BETWEEN 1 AND 47),
  paused     boolean     NOT NULL DEFAULT false,
  changed_at timestamptz NOT NULL DEFAULT now()
);

ALTER TABLE {{t:queue}}
  ADD COLUMN IF NOT EXISTS cancel_requested boolean NOT NULL DEFAULT false,
  ADD COLUMN IF NOT EXISTS progress jsonb;

-- Finished rows by state and age, for retention (the janitor's purge and `troupe purge`), so
-- that a purge reads only what it deletes however much history is kept. Building it takes a
-- lock that holds off writes to the queue table (not reads) until it is built: on a large
-- table, build it first with CREATE INDEX CONCURRENTLY under this name (docs/operations.md),
-- and this statement finds it and does nothing.
CREATE INDEX IF NOT EXISTS {{n:queue_finished_idx}}
  ON {{t:queue}} (state, finished_at) WHERE state IN ('done', 'failed', 'cancelled');

-- Failed rows in message-id order, for `troupe failed list` and retries by filter: a page
-- reads only failed rows however many others are kept. The same note on its lock applies.
CREATE INDEX IF NOT EXISTS {{n:queue_failed_idx}}
  ON {{t:queue}} (message_id) WHERE state = 'failed';

-- Finished rows by state and publication time, for the state queries (`troupe states`,
-- admin::get_states): their default order (newest first), a page after a cursor and a range
-- of publication times read only the rows they return, however much history is kept. The same
-- note on its lock applies.
CREATE INDEX IF NOT EXISTS {{n:queue_history_idx}}
  ON {{t:queue}} (state, enqueued_at, message_id) WHERE state IN ('done', 'failed', 'cancelled');
