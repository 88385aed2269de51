-- Troupe migration 6: groups. A group is a set of messages (its members) that run side by
-- side, with callbacks once every member has succeeded or once one has failed for good, and
-- with the step after it when it is a pipeline step (docs/composition.md).
--   groups         one row per group: how many members it has, how many have not succeeded
--                  yet (remaining) and how many have failed for good (failed), its state
--                  (running, done, failed), the steps it publishes when it is done
--                  (on_success, and pipe_target with the members' results) or has failed
--                  (on_failure), and the first failure.
--   group_members  one row per member: its place in the group, whether it has succeeded (a
--                  member's first successful completion only: a redelivered member never
--                  counts twice) or failed, and its result.
-- Both are written by triggers on the queue table, in the transaction of the statement that
-- publishes or finishes a member, whatever publishes it (a client, a batch, a COPY, the
-- caller's own transaction, a node's follow-ups): a group exists exactly when its members do,
-- and its callbacks are published exactly once, with the last member's completion.
-- Locks: the migration is one transaction, and takes the queue table's strongest lock first
-- (once every transaction already using the table has ended), for its index build and its
-- triggers, until the commit: taken first, it is never upgraded, so the migration cannot
-- deadlock with a node's claim.
LOCK TABLE {{t:queue}} IN ACCESS EXCLUSIVE MODE;

CREATE TABLE IF NOT EXISTS {{t:groups}} (
  group_id       uuid        PRIMARY KEY,
  composition_id uuid,
  total          integer     NOT NULL CHECK (total > 0),
  remaining      integer     NOT NULL CHECK (remaining >= 0),
  failed         integer     NOT NULL DEFAULT 0 CHECK (failed >= 0),
  state          text        NOT NULL DEFAULT 'running'
                             CHECK (state IN ('running', 'done', 'failed')),
  on_success     jsonb       NOT NULL DEFAULT '[]',
  on_failure     jsonb       NOT NULL DEFAULT '[]',
  -- the failure callbacks were published (once per group, the first time it fails)
  failure_published boolean  NOT NULL DEFAULT false,
  pipe_target    jsonb,
  created_at     timestamptz NOT NULL DEFAULT now(),
  finished_at    timestamptz,
  -- the first member that failed for good: {"member": id, "state": ..., "error": ...}
  error          jsonb
);
-- Finished groups by age, for the janitor's retention.
CREATE INDEX IF NOT EXISTS {{n:groups_finished_idx}}
  ON {{t:groups}} (state, finished_at) WHERE state <> 'running';

CREATE TABLE IF NOT EXISTS {{t:group_members}} (
  group_id   uuid    NOT NULL REFERENCES {{t:groups}} ON DELETE CASCADE,
  message_id uuid    NOT NULL,
  position   integer NOT NULL,
  succeeded  boolean NOT NULL DEFAULT false,
  failed     boolean NOT NULL DEFAULT false,
  result     jsonb,
  PRIMARY KEY (group_id, message_id)
);

-- Every message of a composition by its composition id, for the state queries' filter: only
-- messages of a composition are indexed.
CREATE INDEX IF NOT EXISTS {{n:queue_composition_idx}}
  ON {{t:queue}} ((options->>'composition_id'), enqueued_at, message_id)
  WHERE options ? 'composition_id';

-- Publishes `steps` (a JSON array; each a message: id, queue, task, args, options, priority,
-- delay_ms; or {"group": {"members": [messages]}}, a group's members), with `results`
-- appended to the arguments of each (of each member of a group) unless it says pipe_ignore or
-- `results` is NULL. An id that exists already is left alone (a step is published once).
-- Wakes each queue it wrote to.
CREATE OR REPLACE FUNCTION {{t:publish_steps}}(steps jsonb, results jsonb) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $publish$
DECLARE
  queues text[];
BEGIN
  WITH flat AS (
    SELECT CASE WHEN s ? 'group' THEN g.m ELSE s END AS m
      FROM jsonb_array_elements(steps) s
      LEFT JOIN LATERAL jsonb_array_elements(s->'group'->'members') g(m) ON s ? 'group'
     WHERE NOT s ? 'group' OR g.m IS NOT NULL),
  ins AS (
    INSERT INTO {{t:queue}} (message_id, queue_name, task_name, args, options, priority, eta)
    SELECT (m->>'id')::uuid, m->>'queue', m->>'task',
           CASE WHEN results IS NULL OR coalesce((m->'options'->>'pipe_ignore')::boolean, false)
                THEN coalesce(m->'args', '[]')
                ELSE coalesce(m->'args', '[]') || jsonb_build_array(results) END,
           coalesce(m->'options', '{}'), coalesce((m->>'priority')::integer, 0),
           clock_timestamp() + coalesce((m->>'delay_ms')::bigint, 0) * interval '1 millisecond'
      FROM flat
    ON CONFLICT (message_id) DO NOTHING
    RETURNING queue_name)
  SELECT array_agg(DISTINCT queue_name) INTO queues FROM ins;
  PERFORM pg_notify({{wake_channel}}, q) FROM unnest(queues) q;
END
$publish$;

-- A message whose options hold group_def (the first message of a group that is published;
-- an array of them when that message is the first of nested groups) creates its groups: the
-- row and one member row per member, in submission order. A group whose id exists already is
-- left alone.
CREATE OR REPLACE FUNCTION {{t:group_created}}() RETURNS trigger LANGUAGE plpgsql
SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $created$
DECLARE
  def jsonb;
  n integer;
BEGIN
  FOR def IN SELECT d FROM jsonb_array_elements(
                 CASE jsonb_typeof(NEW.options->'group_def') WHEN 'array'
                      THEN NEW.options->'group_def'
                      ELSE jsonb_build_array(NEW.options->'group_def') END) d LOOP
  n := jsonb_array_length(def->'members');
  INSERT INTO {{t:groups}} (group_id, composition_id, total, remaining, on_success, on_failure,
                            pipe_target)
  VALUES ((def->>'id')::uuid, (NEW.options->>'composition_id')::uuid, n, n,
          coalesce(def->'on_success', '[]'), coalesce(def->'on_failure', '[]'),
          def->'pipe_target')
  ON CONFLICT DO NOTHING;
  IF FOUND THEN
    INSERT INTO {{t:group_members}} (group_id, message_id, position)
    SELECT (def->>'id')::uuid, m.id::uuid, m.position
      FROM jsonb_array_elements_text(def->'members') WITH ORDINALITY AS m(id, position)
    ON CONFLICT DO NOTHING;
  END IF;
  END LOOP;
  RETURN NULL;
END
$created$;
-- After the insert (not before it), so that a COPY of many messages stays one multi-row
-- insert; the condition is checked for each inserted row, the function runs for the first
-- message of a group only.
DROP TRIGGER IF EXISTS {{n:queue_group_created}} ON {{t:queue}};
CREATE TRIGGER {{n:queue_group_created}} AFTER INSERT ON {{t:queue}}
  FOR EACH ROW WHEN (NEW.options ? 'group_def')
  EXECUTE FUNCTION {{t:group_created}}();

-- A member that finishes, or goes back to its queue after it failed for good:
--   done             its first success counts (remaining - 1); the last one finishes the
--                    group: its state becomes done, and its on_success steps and its
--                    pipe_target (with the members' results, in submission order) are
--                    published in this transaction;
--   failed/cancelled the group is failed (failed + 1, the first failure kept), and its
--                    on_failure steps are published the first time;
--   queued again     (troupe retry, a re-send of a failed member) the failure no longer
--                    counts: once no member is failed, the group runs again.
CREATE OR REPLACE FUNCTION {{t:group_member_changed}}() RETURNS trigger LANGUAGE plpgsql
SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $changed$
DECLARE
  -- A re-send of a member's id may replace its options: its group is the one it was in.
  gid uuid := coalesce(NEW.options->>'group_id', OLD.options->>'group_id')::uuid;
  was_failed boolean;
  was_published boolean;
  g {{t:groups}}%ROWTYPE;
BEGIN
  IF NEW.state = 'done' THEN
    SELECT m.failed INTO was_failed FROM {{t:group_members}} m
     WHERE m.group_id = gid AND m.message_id = NEW.message_id AND NOT m.succeeded FOR UPDATE;
    IF NOT FOUND THEN
      RETURN NULL;
    END IF;
    UPDATE {{t:group_members}} m SET succeeded = true, failed = false, result = NEW.result
     WHERE m.group_id = gid AND m.message_id = NEW.message_id;
    UPDATE {{t:groups}} x
       SET remaining = x.remaining - 1, failed = x.failed - was_failed::integer,
           state = CASE WHEN x.failed - was_failed::integer > 0 THEN 'failed'
                        WHEN x.remaining = 1 THEN 'done' ELSE 'running' END,
           finished_at = CASE WHEN x.failed - was_failed::integer > 0 THEN x.finished_at
                              WHEN x.remaining = 1 THEN now() END
     WHERE x.group_id = gid
    RETURNING x.* INTO g;
    IF FOUND AND g.state = 'done' THEN
      PERFORM {{t:publish_steps}}(g.on_success, NULL);
      IF g.pipe_target IS NOT NULL THEN
        PERFORM {{t:publish_steps}}(
          jsonb_build_array(g.pipe_target),
          (SELECT coalesce(jsonb_agg(coalesce(m.result, 'null') ORDER BY m.position), '[]')
             FROM {{t:group_members}} m WHERE m.group_id = gid));
      END IF;
    END IF;
  ELSIF NEW.state IN ('failed', 'cancelled') THEN
    UPDATE {{t:group_members}} m SET failed = true
     WHERE m.group_id = gid AND m.message_id = NEW.message_id AND NOT m.failed
       AND NOT m.succeeded;
    IF NOT FOUND THEN
      RETURN NULL;
    END IF;
    SELECT x.failure_published INTO was_published FROM {{t:groups}} x
     WHERE x.group_id = gid FOR UPDATE;
    UPDATE {{t:groups}} x
       SET failed = x.failed + 1, state = 'failed', finished_at = coalesce(x.finished_at, now()),
           error = coalesce(x.error, jsonb_build_object('member', NEW.message_id,
                                                        'state', NEW.state::text,
                                                        'error', NEW.error)),
           failure_published = true
     WHERE x.group_id = gid
    RETURNING x.* INTO g;
    IF FOUND AND NOT was_published THEN
      PERFORM {{t:publish_steps}}(g.on_failure, NULL);
    END IF;
  ELSE
    UPDATE {{t:group_members}} m SET failed = false
     WHERE m.group_id = gid AND m.message_id = NEW.message_id AND m.failed;
    IF NOT FOUND THEN
      RETURN NULL;
    END IF;
    UPDATE {{t:groups}} x
       SET failed = x.failed - 1,
           state = CASE WHEN x.failed = 1 THEN 'running' ELSE 'failed' END,
           finished_at = CASE WHEN x.failed = 1 THEN NULL ELSE x.finished_at END,
           error = CASE WHEN x.failed = 1 THEN NULL ELSE x.error END
     WHERE x.group_id = gid;
  END IF;
  RETURN NULL;
END
$changed$;
-- The state tests come first: for the completions of messages outside any group, the
-- condition reads the options only of rows that finish or leave a failure.
DROP TRIGGER IF EXISTS {{n:queue_group_member}} ON {{t:queue}};
CREATE TRIGGER {{n:queue_group_member}} AFTER UPDATE OF state ON {{t:queue}}
  FOR EACH ROW WHEN (OLD.state IS DISTINCT FROM NEW.state
                     AND (NEW.state IN ('done', 'failed', 'cancelled')
                          OR OLD.state IN ('failed', 'cancelled'))
                     AND (NEW.options ? 'group_id' OR OLD.options ? 'group_id'))
  EXECUTE FUNCTION {{t:group_member_changed}}();
