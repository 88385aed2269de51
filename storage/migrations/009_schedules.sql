-- Troupe migration 9: schedules (docs/scheduler.md), and the tasks each node registers.
--   schedules  one row per named schedule: the message it publishes (task, queue, arguments,
--              options, priority), when (a fixed interval on the grid of its start, or a cron
--              expression in an IANA time zone), its policies (overlap, catch-up, jitter), the
--              next occurrence due, and what the last occurrence did. A scheduler takes the due
--              rows with SKIP LOCKED, publishes each occurrence through the deduplicated path
--              (key troupe:schedule:<id>:<occurrence>, and an id derived from them) and moves
--              next_run on, in one transaction: any number of schedulers may run on one area,
--              and each occurrence is published once.
--   nodes.tasks  the task names a node registered, so that a schedule whose task no live node
--              runs is reported.
-- Locks: the nodes table's strongest lock for the added column (a catalog change only: the
-- column has a constant default), as long as the nodes' liveness statements take to drain.
CREATE TABLE IF NOT EXISTS {{t:schedules}} (
  schedule_id     uuid        PRIMARY KEY DEFAULT gen_random_uuid(),
  name            text        NOT NULL UNIQUE CHECK (name <> '' AND octet_length(name) <= 200),
  task_name       text        NOT NULL CHECK (task_name <> ''),
  queue_name      text        NOT NULL CHECK (queue_name <> ''),
  args            jsonb       NOT NULL DEFAULT '[]' CHECK (jsonb_typeof(args) = 'array'),
  options         jsonb       NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(options) = 'object'),
  priority        integer     NOT NULL DEFAULT 0,
  interval_ms     bigint      CHECK (interval_ms > 0),
  cron            text,
  time_zone       text        NOT NULL DEFAULT 'UTC',
  enabled         boolean     NOT NULL DEFAULT true,
  start_at        timestamptz NOT NULL,
  next_run        timestamptz NOT NULL,
  overlap         text        NOT NULL DEFAULT 'allow' CHECK (overlap IN ('allow', 'skip')),
  catch_up        text        NOT NULL DEFAULT 'coalesce' CHECK (catch_up IN ('coalesce', 'none')),
  jitter_ms       bigint      NOT NULL DEFAULT 0 CHECK (jitter_ms >= 0),
  -- the last occurrence a scheduler handled, what it did with it, the message it published, and
  -- why its publish failed (outcome failed: the message was refused, say a task name too long)
  last_occurrence timestamptz,
  last_outcome    text        CHECK (last_outcome IN ('published', 'overlap', 'missed', 'failed')),
  last_message_id uuid,
  last_error      text,
  published       bigint      NOT NULL DEFAULT 0,
  created_at      timestamptz NOT NULL DEFAULT now(),
  updated_at      timestamptz NOT NULL DEFAULT now(),
  CHECK ((interval_ms IS NULL) <> (cron IS NULL))
);

-- What a tick reads: the enabled rows due, earliest first.
CREATE INDEX IF NOT EXISTS {{n:schedules_due_idx}} ON {{t:schedules}} (next_run, schedule_id)
  WHERE enabled;

ALTER TABLE {{t:nodes}} ADD COLUMN IF NOT EXISTS tasks text[] NOT NULL DEFAULT '{}';
