-- Troupe migration 5: operations. Queues can be paused, and messages cancelled.
--   queue_control        one row per queue that was ever paused or resumed: whether it is
--                        paused now, and since when. A queue without a row is not paused. Every
--                        claim reads it, so nothing is claimed once a pause has committed.
--   cancel_requested     set by a cancel: a queued message is cancelled at once; a running one
--                        is stopped by its node before it starts, or its task is told; a
--                        delivery of it that fails, or that a node hands back, is cancelled
--                        instead of queued again.
--   progress             what a running task last reported of its progress (a number or JSON).
--   area_settings        one row: whether the area keeps attempt history (off by default).
--   attempts             the attempt history: one row per started execution of a message,
--                        written by the statements that complete messages and recover those
--                        of dead nodes, while area_settings says so. Never arguments or
--                        results.
--   state_counts         how many rows of each queue are done, failed or cancelled, for
--                        `troupe stats` (which then reads no history), with
--   state_count_changes  the changes to those counts not yet added: each statement that
--                        moves rows into or out of a finished state (or deletes them)
--                        appends its change here, a plain insert that waits for nobody, and
--                        the janitor adds them up into state_counts. A row that goes back
--                        from done or failed to queued (a re-send, a retry) is counted out
--                        by the trigger queue_requeued (function count_requeued).
--   result_expires_at    when a stored result expires (result_ttl): a read after it reports
--                        it expired, and the janitor clears the result (the expiry stays).
--                        NULL: it never does.
-- Locks: the migration is one transaction. Adding the columns, first, changes only the queue
-- table's description (their defaults are constants), but takes the table's strongest lock
-- once every transaction already using the table has ended, and holds it until the commit:
-- the index builds and the count of finished rows after it run while nothing else reads or
-- writes the table. (Taken first, the lock is never upgraded, so the migration cannot
-- deadlock with a node's claim.)
CREATE TABLE IF NOT EXISTS {{t:queue_control}} (
  queue_name text        PRIMARY KEY CHECK (octet_length(queue_name) BETWEEN 1 AND 47),
  paused     boolean     NOT NULL DEFAULT false,
  changed_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE IF NOT EXISTS {{t:area_settings}} (
  id              boolean PRIMARY KEY DEFAULT true CHECK (id),
  attempt_history boolean NOT NULL DEFAULT false,
  changed_at      timestamptz NOT NULL DEFAULT now()
);
INSERT INTO {{t:area_settings}} (id) VALUES (true) ON CONFLICT DO NOTHING;

-- outcome: success, failure (the message may be retried), cancelled; NULL for an attempt lost
-- with its node (shown as incomplete). An attempt that runs has no record yet: its row shows
-- it. Written by plain inserts, one per attempt, read by message id.
CREATE TABLE IF NOT EXISTS {{t:attempts}} (
  -- The order of a message's records (one sequence, no per-session cache: the order of the
  -- inserts, whichever session made them).
  attempt_id  bigint      GENERATED ALWAYS AS IDENTITY,
  message_id  uuid        NOT NULL,
  attempt     integer     NOT NULL,
  queue_name  text        NOT NULL,
  task_name   text        NOT NULL,
  node_id     integer,
  started_at  timestamptz NOT NULL,
  finished_at timestamptz,
  outcome     text        CHECK (outcome IN ('success', 'failure', 'cancelled')),
  error_type  text,
  error_text  text        CHECK (char_length(error_text) <= 2000)
);
CREATE INDEX IF NOT EXISTS {{n:attempts_message_idx}} ON {{t:attempts}} (message_id);
-- For purges by age: records come in the order their attempts ended, so a block range index
-- finds the old ones at almost no cost to each insert.
CREATE INDEX IF NOT EXISTS {{n:attempts_started_idx}} ON {{t:attempts}} USING brin (started_at);


-- confirm_start: the row came back from a node that died holding it (reap_dead_nodes), so its
-- next start is written before its task runs (a task that brings its process down within the
-- second a start write usually waits is then counted, see "Poison messages" in the guide).
ALTER TABLE {{t:queue}}
  ADD COLUMN IF NOT EXISTS cancel_requested boolean NOT NULL DEFAULT false,
  ADD COLUMN IF NOT EXISTS progress jsonb,
  ADD COLUMN IF NOT EXISTS confirm_start boolean NOT NULL DEFAULT false,
  ADD COLUMN IF NOT EXISTS result_expires_at timestamptz;

-- Finished rows by state and age, for retention (the janitor's purge and `troupe purge`), so
-- that a purge reads only what it deletes however much history is kept. On a large table,
-- build it first with CREATE INDEX CONCURRENTLY under this name (docs/operations.md), and
-- this statement finds it and builds nothing.
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

CREATE TABLE IF NOT EXISTS {{t:state_counts}} (
  queue_name text NOT NULL,
  state      {{t:state}} NOT NULL,
  n          bigint NOT NULL,
  PRIMARY KEY (queue_name, state)
);
-- No index: it is read whole, and it holds the changes of a janitor interval or so.
CREATE TABLE IF NOT EXISTS {{t:state_count_changes}} (
  queue_name text NOT NULL,
  state      {{t:state}} NOT NULL,
  n          bigint NOT NULL
);
-- The counts start from the rows there are. Nodes of an earlier release (or this release's
-- nodes on version-4 statements, for the minute they take to see this version) do not count
-- what they finish: `troupe stats --recount` sets the counts right once they are gone.
INSERT INTO {{t:state_counts}} (queue_name, state, n)
SELECT queue_name, state, count(*) FROM {{t:queue}}
 WHERE state IN ('done', 'failed', 'cancelled')
 GROUP BY queue_name, state
ON CONFLICT DO NOTHING;


-- Stored results that expire, by expiry, for the janitor that clears them: only a row holding
-- a result with a result_ttl has an entry. Its build reads the table once and writes an empty
-- index.
CREATE INDEX IF NOT EXISTS {{n:queue_result_expiry_idx}}
  ON {{t:queue}} (result_expires_at) WHERE result_expires_at IS NOT NULL AND result IS NOT NULL;

-- A row that goes back from done or failed to queued (a re-send of its id, which producers of
-- every version send with the same statement, or an operator's retry) leaves its count, one
-- change per row, and loses the expiry of its old result. The condition is checked for every
-- update that sets the state, and the function runs only for such rows.
CREATE OR REPLACE FUNCTION {{t:count_requeued}}() RETURNS trigger LANGUAGE plpgsql AS $count$
BEGIN
  INSERT INTO {{t:state_count_changes}} (queue_name, state, n)
  VALUES (OLD.queue_name, OLD.state, -1);
  NEW.result_expires_at := NULL;
  RETURN NEW;
END
$count$;
DROP TRIGGER IF EXISTS {{n:queue_requeued}} ON {{t:queue}};
CREATE TRIGGER {{n:queue_requeued}} BEFORE UPDATE OF state ON {{t:queue}}
  FOR EACH ROW WHEN (OLD.state IN ('done', 'failed') AND NEW.state = 'queued')
  EXECUTE FUNCTION {{t:count_requeued}}();
