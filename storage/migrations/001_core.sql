-- Troupe migration 1: the queue table, its state enum, and the nodes registry.
-- Identifiers are written as placeholders that name the area's schema and table prefix; see
-- storage/statements.hpp for how they are filled in.

CREATE SCHEMA IF NOT EXISTS {{schema}};

DO $troupe$ BEGIN
  CREATE TYPE {{t:state}} AS ENUM ('queued', 'running', 'done', 'failed', 'cancelled');
EXCEPTION WHEN duplicate_object THEN NULL;
END $troupe$;

-- One row per message: the envelope, its state record, its result and its last failure.
CREATE TABLE IF NOT EXISTS {{t:queue}} (
  message_id   uuid        PRIMARY KEY,
  queue_name   text        NOT NULL,
  task_name    text        NOT NULL,
  args         jsonb       NOT NULL DEFAULT '[]',
  options      jsonb       NOT NULL DEFAULT '{}',
  state        {{t:state}} NOT NULL DEFAULT 'queued',
  priority     integer     NOT NULL DEFAULT 0,
  -- earliest time the message may run; enqueue time when not delayed
  eta          timestamptz NOT NULL DEFAULT now(),
  -- the message timestamp: first enqueue, kept across retries
  enqueued_at  timestamptz NOT NULL DEFAULT now(),
  -- claims so far; with owner_node it is the delivery token of the current claim
  attempts     integer     NOT NULL DEFAULT 0,
  owner_node   integer,
  started_at   timestamptz,
  finished_at  timestamptz,
  result       jsonb,
  error        jsonb
);

-- Only claimable rows are indexed, in claim order, so retained history never slows a claim.
CREATE INDEX IF NOT EXISTS {{n:queue_fetch_idx}}
  ON {{t:queue}} (queue_name, priority, eta, message_id) WHERE state = 'queued';

-- Running rows by owner, for the janitor's recovery of dead nodes' messages.
CREATE INDEX IF NOT EXISTS {{n:queue_running_idx}}
  ON {{t:queue}} (owner_node) WHERE state = 'running';

-- Worker nodes. A live node holds a session advisory lock (the area's lock class, node_id) on
-- its listener connection. A janitor notes when a node's lock was first seen free
-- (lock_lost_at); a node whose lock stays free for the grace period is dead.
CREATE TABLE IF NOT EXISTS {{t:nodes}} (
  node_id      integer     GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  name         text        NOT NULL,
  host         text        NOT NULL,
  pid          integer     NOT NULL,
  queues       text[]      NOT NULL DEFAULT '{}',
  started_at   timestamptz NOT NULL DEFAULT now(),
  lock_lost_at timestamptz
);
