-- Troupe migration 7: coordination. Rate limiters (concurrent, bucket, window), per-key
-- concurrency and barriers (docs/coordination.md).
--   coordination        one row per named limiter or barrier: its kind, its capacity (the
--                       limit, or a barrier's parties), a bucket's current window and its use,
--                       a barrier's arrivals and release, and when a barrier expires.
--   coordination_holds  one row per slot taken: a concurrent limiter's slot (held by a running
--                       message, or by a guard until it lets go or its TTL runs out), or one
--                       acquisition of a window limiter (until the window has passed). A slot
--                       taken by a node goes with the node's row: the janitor deletes that row
--                       once the node's liveness is lost, so a dead holder's slots are free a
--                       grace period after its death, not at their TTL.
-- A message under a limit carries it in its options ("limits", "concurrency_key"). The
-- fetch index keeps such messages apart: its first column is the queue's hash with its lowest
-- bit flipped for them, so a claim walks the queue's other messages as before, and the
-- messages under limits through their own range (claim_limited). Every function that decides
-- on a key holds the key's advisory lock (lock class {{coordination_lock_class}}, the key's
-- hash) until its transaction ends: claims only try it (a key another node is deciding on is
-- left for the next claim), so no claim ever waits for a lock or deadlocks.
-- Locks: the migration is one transaction and takes the queue table's strongest lock first,
-- for its index rebuild and its trigger, until the commit (as migration 6).
LOCK TABLE {{t:queue}} IN ACCESS EXCLUSIVE MODE;

CREATE TABLE IF NOT EXISTS {{t:coordination}} (
  name         text        PRIMARY KEY,
  kind         text        NOT NULL CHECK (kind IN ('concurrent', 'bucket', 'window', 'barrier')),
  capacity     integer     NOT NULL CHECK (capacity >= 1),
  window_ms    bigint      NOT NULL DEFAULT 0 CHECK (window_ms >= 0),
  -- bucket: the start of the current window and how many it has given; barrier: arrivals
  window_start timestamptz,
  used         integer     NOT NULL DEFAULT 0,
  released_at  timestamptz,
  expires_at   timestamptz NOT NULL DEFAULT 'infinity',
  updated_at   timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE IF NOT EXISTS {{t:coordination_holds}} (
  -- '' for a named limiter; a task's name for its per-key concurrency
  scope       text        NOT NULL,
  name        text        NOT NULL,
  -- a message id, a guard's id, or a window acquisition's own id
  holder      text        NOT NULL,
  node_id     integer     REFERENCES {{t:nodes}} ON DELETE CASCADE,
  message_id  uuid,
  acquired_at timestamptz NOT NULL DEFAULT now(),
  expires_at  timestamptz NOT NULL DEFAULT 'infinity',
  PRIMARY KEY (scope, name, holder)
);
CREATE INDEX IF NOT EXISTS {{n:coordination_holds_message_idx}}
  ON {{t:coordination_holds}} (message_id) WHERE message_id IS NOT NULL;
CREATE INDEX IF NOT EXISTS {{n:coordination_holds_node_idx}}
  ON {{t:coordination_holds}} (node_id) WHERE node_id IS NOT NULL;
CREATE INDEX IF NOT EXISTS {{n:coordination_holds_expiry_idx}}
  ON {{t:coordination_holds}} (expires_at) WHERE expires_at < 'infinity';

-- The fetch index, with messages under limits in a range of their own (see above). Rebuilt
-- only while it is still the index of migration 3.
DO $troupe$ BEGIN
  IF NOT EXISTS (SELECT FROM pg_index
                  WHERE indexrelid = to_regclass('{{schema}}.{{n:queue_fetch_idx}}')
                    AND pg_get_indexdef(indexrelid) LIKE '%concurrency_key%') THEN
    DROP INDEX IF EXISTS {{schema}}.{{n:queue_fetch_idx}};
    CREATE INDEX {{n:queue_fetch_idx}}
      ON {{t:queue}} ((hashtext(queue_name) # (options ?| '{limits,concurrency_key}'::text[])::integer),
                      priority, eta, message_id)
      WITH (deduplicate_items = off) WHERE state = 'queued';
  END IF;
END $troupe$;

-- The first fault of the limits a message's options declare, as text naming the key, or NULL.
CREATE OR REPLACE FUNCTION {{t:limit_fault}}(options jsonb) RETURNS text
LANGUAGE plpgsql IMMUTABLE SET search_path = pg_catalog, pg_temp AS $fault$
DECLARE
  l jsonb;
BEGIN
  IF options ? 'limits' THEN
    IF jsonb_typeof(options->'limits') IS DISTINCT FROM 'array' THEN
      RETURN 'limits: not an array';
    END IF;
    FOR l IN SELECT jsonb_array_elements(options->'limits') LOOP
      IF jsonb_typeof(l) IS DISTINCT FROM 'object' OR jsonb_typeof(l->'key') IS DISTINCT FROM 'string'
         OR l->>'key' = '' THEN
        RETURN 'limits: an entry without a key';
      ELSIF NOT coalesce(l->>'kind' IN ('concurrent', 'bucket', 'window'), false) THEN
        RETURN format('limiter "%s": unknown kind %s (concurrent, bucket or window)',
                      l->>'key', coalesce(l->'kind', 'null'));
      ELSIF jsonb_typeof(l->'limit') IS DISTINCT FROM 'number' OR (l->>'limit')::numeric < 1
            OR (l->>'limit')::numeric > 1000000000 OR (l->>'limit')::numeric % 1 <> 0 THEN
        RETURN format('limiter "%s": limit %s is not a whole number from 1', l->>'key',
                      coalesce(l->'limit', 'null'));
      ELSIF l->>'kind' <> 'concurrent' AND (jsonb_typeof(l->'window_ms') IS DISTINCT FROM 'number'
            OR (l->>'window_ms')::numeric < 1 OR (l->>'window_ms')::numeric > 31536000000
            OR (l->>'window_ms')::numeric % 1 <> 0) THEN
        RETURN format('limiter "%s": window_ms %s is not a whole number of milliseconds from 1',
                      l->>'key', coalesce(l->'window_ms', 'null'));
      END IF;
    END LOOP;
  END IF;
  IF options ? 'concurrency_key' THEN
    IF jsonb_typeof(options->'concurrency_key') IS DISTINCT FROM 'string' THEN
      RETURN 'concurrency_key: not a string';
    ELSIF options ? 'concurrency_limit' AND (jsonb_typeof(options->'concurrency_limit') IS DISTINCT FROM 'number'
          OR (options->>'concurrency_limit')::numeric < 1
          OR (options->>'concurrency_limit')::numeric > 1000000000
          OR (options->>'concurrency_limit')::numeric % 1 <> 0) THEN
      RETURN format('concurrency key "%s": concurrency_limit %s is not a whole number from 1',
                    options->>'concurrency_key', options->'concurrency_limit');
    END IF;
  END IF;
  RETURN NULL;
END
$fault$;

-- Whether one more slot of a limiter is free now, and the fault when the limiter is another
-- kind than the caller asks for (NULL when it is not). The caller holds the key's lock.
CREATE OR REPLACE FUNCTION {{t:limit_room}}(scope text, name text, kind text, capacity integer,
                                            window_ms bigint, OUT room boolean, OUT fault text)
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $room$
DECLARE
  c {{t:coordination}}%ROWTYPE;
  start timestamptz;
BEGIN
  fault := NULL;
  IF scope = '' THEN
    SELECT * INTO c FROM {{t:coordination}} x WHERE x.name = limit_room.name;
    IF FOUND AND c.kind <> limit_room.kind THEN
      room := false;
      fault := format('limiter "%s" is a %s %s, not a %s limiter', limit_room.name, c.kind,
                      CASE c.kind WHEN 'barrier' THEN 'key' ELSE 'limiter' END, limit_room.kind);
      RETURN;
    END IF;
  END IF;
  -- The clock now, not the transaction's start: the caller may have waited for the key's lock.
  IF kind = 'bucket' THEN
    start := to_timestamp(floor(extract(epoch FROM clock_timestamp()) * 1000 / window_ms)
                          * window_ms / 1000.0);
    room := c.window_start IS NULL OR c.window_start < start OR c.used < capacity;
  ELSE
    room := (SELECT count(*) FROM {{t:coordination_holds}} h
              WHERE h.scope = limit_room.scope AND h.name = limit_room.name
                AND h.expires_at > clock_timestamp()) < capacity;
  END IF;
END
$room$;

-- Takes the slot limit_room found free, for `holder` (a concurrent slot until `expires_at`,
-- or until the message `message_id` leaves its running state).
CREATE OR REPLACE FUNCTION {{t:limit_take}}(scope text, name text, kind text, capacity integer,
                                            window_ms bigint, holder text, node integer,
                                            message_id uuid, expires_at timestamptz)
RETURNS void LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $take$
#variable_conflict use_column
DECLARE
  start timestamptz;
BEGIN
  IF scope = '' THEN
    start := CASE WHEN kind = 'bucket' THEN to_timestamp(
               floor(extract(epoch FROM clock_timestamp()) * 1000 / window_ms) * window_ms / 1000.0)
             END;
    -- A bucket's window only moves forward: an acquisition counts in the newest one.
    INSERT INTO {{t:coordination}} AS x (name, kind, capacity, window_ms, window_start, used)
    VALUES (limit_take.name, kind, capacity, window_ms, start, CASE WHEN kind = 'bucket' THEN 1 ELSE 0 END)
    ON CONFLICT (name) DO UPDATE
       SET capacity = excluded.capacity, window_ms = excluded.window_ms,
           window_start = CASE WHEN x.window_start IS NULL THEN excluded.window_start
                               ELSE greatest(x.window_start, excluded.window_start) END,
           used = CASE WHEN x.kind <> 'bucket' THEN 0
                       WHEN x.window_start IS NULL OR x.window_start < excluded.window_start THEN 1
                       ELSE x.used + 1 END,
           updated_at = now()
     WHERE x.kind = 'bucket' OR x.capacity <> excluded.capacity
        OR x.window_ms <> excluded.window_ms OR x.updated_at < now() - interval '1 minute';
  END IF;
  IF kind = 'concurrent' THEN
    INSERT INTO {{t:coordination_holds}} (scope, name, holder, node_id, message_id, expires_at)
    VALUES (scope, limit_take.name, holder, node, message_id, limit_take.expires_at)
    ON CONFLICT DO NOTHING;
  ELSIF kind = 'window' THEN
    INSERT INTO {{t:coordination_holds}} (scope, name, holder, expires_at)
    VALUES (scope, limit_take.name, gen_random_uuid()::text,
            clock_timestamp() + window_ms * interval '1 millisecond');
  END IF;
END
$take$;

-- A guard's acquisition: waits for the key's lock (one key, so it cannot deadlock), then takes
-- a slot if one is free. Raises invalid_parameter_value naming the key when the limiter is of
-- another kind. A holder that holds its slot already keeps it (true).
CREATE OR REPLACE FUNCTION {{t:limit_acquire}}(scope text, name text, kind text,
                                               capacity integer, window_ms bigint, holder text,
                                               node integer, ttl_ms bigint)
RETURNS boolean LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $acquire$
DECLARE
  r record;
BEGIN
  PERFORM pg_advisory_xact_lock({{coordination_lock_class}}, hashtext(scope || chr(31) || name));
  IF kind = 'concurrent' AND EXISTS (
       SELECT FROM {{t:coordination_holds}} h WHERE h.scope = limit_acquire.scope
          AND h.name = limit_acquire.name AND h.holder = limit_acquire.holder
          AND h.expires_at > clock_timestamp()) THEN
    RETURN true;
  END IF;
  SELECT * INTO r FROM {{t:limit_room}}(scope, name, kind, capacity, window_ms);
  IF r.fault IS NOT NULL THEN
    RAISE EXCEPTION '%', r.fault USING ERRCODE = 'invalid_parameter_value';
  END IF;
  IF NOT r.room THEN
    RETURN false;
  END IF;
  PERFORM {{t:limit_take}}(scope, name, kind, capacity, window_ms, holder, node, NULL,
                           clock_timestamp() + ttl_ms * interval '1 millisecond');
  RETURN true;
END
$acquire$;

-- A guard lets its slot go. Whether it held one.
CREATE OR REPLACE FUNCTION {{t:limit_release}}(scope text, name text, holder text)
RETURNS boolean LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $release$
BEGIN
  DELETE FROM {{t:coordination_holds}} h
   WHERE h.scope = limit_release.scope AND h.name = limit_release.name
     AND h.holder = limit_release.holder;
  RETURN FOUND;
END
$release$;

-- Locks up to `wanted` ready messages under limits of queue `queue`, in claim order, for
-- node `node`, taking their slots (in the caller's transaction: a claim that rolls back gives
-- them back). A message is taken only when every limit it declares has room; one that a limit
-- holds back stays queued, and so does every later message sharing one of its keys, so a
-- key's messages start in claim order. A key whose lock another claim holds is left for the
-- next claim. At most 10 * wanted + 100 messages are looked at. A message whose limits are
-- malformed fails at once, its failure naming them. Returns the rows as claim_lock does, and
-- leaves how many it took in the transaction's setting troupe.limited_taken.
CREATE OR REPLACE FUNCTION {{t:claim_limited}}(queue text, node integer, wanted integer)
RETURNS TABLE (address text, id text, task text, args text, options text, attempt integer,
               priority integer, enqueued_ms bigint, eta_ms bigint, confirm_start boolean,
               lost boolean)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $claim$
DECLARE
  r record;
  checks jsonb;
  c jsonb;
  k text;
  keys text[];
  blocked text[] := '{}';
  locked text[] := '{}';
  fault text;
  ok boolean;
  room record;
  taken integer := 0;
BEGIN
  IF wanted <= 0 OR EXISTS (SELECT FROM {{t:queue_control}} x
                             WHERE x.queue_name = claim_limited.queue AND x.paused) THEN
    RETURN;
  END IF;
  FOR r IN SELECT q.ctid AS a, q.message_id AS m, q.task_name AS t, q.options AS o
             FROM {{t:queue}} q
            WHERE (hashtext(q.queue_name) # (q.options ?| '{limits,concurrency_key}'::text[])::integer)
                  = (hashtext(claim_limited.queue) # 1)
              AND q.queue_name = claim_limited.queue AND q.state = 'queued' AND q.eta <= now()
              AND q.options ?| '{limits,concurrency_key}'::text[]
            ORDER BY q.priority, q.eta, q.message_id
            LIMIT 10 * wanted + 100 LOOP
    fault := {{t:limit_fault}}(r.o);
    IF fault IS NULL THEN
      checks := coalesce((SELECT jsonb_agg(jsonb_build_object(
                                   'scope', '', 'name', l->>'key', 'kind', l->>'kind',
                                   'capacity', (l->>'limit')::integer,
                                   'window_ms', coalesce((l->>'window_ms')::bigint, 0)))
                            FROM jsonb_array_elements(r.o->'limits') l), '[]');
      IF r.o ? 'concurrency_key' THEN
        checks := checks || jsonb_build_object(
          'scope', r.t, 'name', r.o->>'concurrency_key', 'kind', 'concurrent',
          'capacity', coalesce((r.o->>'concurrency_limit')::integer, 1), 'window_ms', 0);
      END IF;
      keys := ARRAY(SELECT (x->>'scope') || chr(31) || (x->>'name')
                      FROM jsonb_array_elements(checks) x);
      ok := NOT (keys && blocked);
      IF ok THEN
        FOR c IN SELECT jsonb_array_elements(checks) LOOP
          k := (c->>'scope') || chr(31) || (c->>'name');
          IF NOT k = ANY (locked) THEN
            IF NOT pg_try_advisory_xact_lock({{coordination_lock_class}}, hashtext(k)) THEN
              ok := false;
              EXIT;
            END IF;
            locked := locked || k;
          END IF;
          SELECT * INTO room FROM {{t:limit_room}}(c->>'scope', c->>'name', c->>'kind',
                                                   (c->>'capacity')::integer,
                                                   (c->>'window_ms')::bigint);
          IF room.fault IS NOT NULL THEN
            fault := room.fault;
            EXIT;
          END IF;
          IF NOT room.room THEN
            ok := false;
            EXIT;
          END IF;
        END LOOP;
      END IF;
    END IF;
    IF fault IS NOT NULL THEN
      UPDATE {{t:queue}} q
         SET state = 'failed', finished_at = now(),
             error = jsonb_build_object('type', 'troupe::invalid_limit', 'text', fault,
                                        'retries', 0, 'max_retries', 0)
       WHERE q.ctid = (SELECT z.ctid FROM {{t:queue}} z
                        WHERE z.ctid = r.a AND z.message_id = r.m AND z.state = 'queued'
                          FOR UPDATE SKIP LOCKED);
      IF FOUND THEN
        INSERT INTO {{t:state_count_changes}} (queue_name, state, n)
        VALUES (claim_limited.queue, 'failed', 1);
        PERFORM pg_notify({{results_channel}}, ''); -- its result waiters learn of the failure
      END IF;
      CONTINUE;
    END IF;
    IF ok THEN
      -- The row may have changed since the scan's snapshot: only a row still queued is taken.
      RETURN QUERY
        SELECT q.ctid::text, q.message_id::text, q.task_name, q.args::text, q.options::text,
               least(q.attempts + 1, 1000000000), q.priority,
               (date_part('epoch', q.enqueued_at) * 1000)::bigint,
               (date_part('epoch', q.eta) * 1000)::bigint,
               q.confirm_start, coalesce(q.error->>'type' = 'troupe::attempt_lost', false)
          FROM {{t:queue}} q
         WHERE q.ctid = r.a AND q.message_id = r.m AND q.state = 'queued' AND q.eta <= now()
           FOR UPDATE OF q SKIP LOCKED;
      ok := FOUND;
    END IF;
    IF NOT ok THEN
      blocked := blocked || keys;
      CONTINUE;
    END IF;
    FOR c IN SELECT jsonb_array_elements(checks) LOOP
      PERFORM {{t:limit_take}}(c->>'scope', c->>'name', c->>'kind', (c->>'capacity')::integer,
                               (c->>'window_ms')::bigint, r.m::text, node, r.m, 'infinity');
    END LOOP;
    taken := taken + 1;
    EXIT WHEN taken >= wanted;
  END LOOP;
  -- For claim_lock, later in this transaction: the claim's other messages fill the rest.
  PERFORM set_config('troupe.limited_taken', taken::text, true);
END
$claim$;

-- A message under limits that leaves its running state (finished, retried, recovered from a
-- dead node, cancelled) or is deleted while running gives its concurrent slots back, and
-- wakes its queue on every node: a message its limit held back may run now.
CREATE OR REPLACE FUNCTION {{t:limits_released}}() RETURNS trigger LANGUAGE plpgsql
SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $released$
BEGIN
  DELETE FROM {{t:coordination_holds}} h WHERE h.message_id = OLD.message_id;
  IF FOUND THEN
    PERFORM pg_notify({{wake_channel}}, OLD.queue_name);
  END IF;
  RETURN NULL;
END
$released$;
DROP TRIGGER IF EXISTS {{n:queue_limits_released}} ON {{t:queue}};
CREATE TRIGGER {{n:queue_limits_released}} AFTER UPDATE OF state ON {{t:queue}}
  FOR EACH ROW WHEN (OLD.state = 'running' AND NEW.state <> 'running'
                     AND OLD.options ?| '{limits,concurrency_key}'::text[])
  EXECUTE FUNCTION {{t:limits_released}}();
DROP TRIGGER IF EXISTS {{n:queue_limits_deleted}} ON {{t:queue}};
CREATE TRIGGER {{n:queue_limits_deleted}} AFTER DELETE ON {{t:queue}}
  FOR EACH ROW WHEN (OLD.state = 'running'
                     AND OLD.options ?| '{limits,concurrency_key}'::text[])
  EXECUTE FUNCTION {{t:limits_released}}();

-- Creates barrier `name` for `parties` arrivals, live for `ttl_ms`. True when it created it;
-- false when a live barrier of that name and party count exists already. Raises
-- invalid_parameter_value naming the barrier when it exists with another party count, or when
-- the name is a limiter's.
CREATE OR REPLACE FUNCTION {{t:barrier_create}}(name text, parties integer, ttl_ms bigint)
RETURNS boolean LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $create$
#variable_conflict use_column
DECLARE
  c {{t:coordination}}%ROWTYPE;
BEGIN
  PERFORM pg_advisory_xact_lock({{coordination_lock_class}}, hashtext(chr(31) || name));
  SELECT * INTO c FROM {{t:coordination}} x WHERE x.name = barrier_create.name;
  IF FOUND AND c.kind <> 'barrier' THEN
    RAISE EXCEPTION 'barrier "%": the name is a % limiter''s', name, c.kind
      USING ERRCODE = 'invalid_parameter_value';
  END IF;
  IF FOUND AND c.expires_at > now() THEN
    IF c.capacity <> parties THEN
      RAISE EXCEPTION 'barrier "%" exists with % parties, not %', name, c.capacity, parties
        USING ERRCODE = 'invalid_parameter_value';
    END IF;
    RETURN false;
  END IF;
  INSERT INTO {{t:coordination}} AS x (name, kind, capacity, used, expires_at)
  VALUES (name, 'barrier', parties, 0, now() + ttl_ms * interval '1 millisecond')
  ON CONFLICT (name) DO UPDATE
     SET kind = 'barrier', capacity = excluded.capacity, used = 0, released_at = NULL,
         window_start = NULL, expires_at = excluded.expires_at, updated_at = now();
  RETURN true;
END
$create$;

-- One party arrives at barrier `name`. True when the barrier is released (by this arrival,
-- the last one it waited for, or before); false while it waits for others. The release
-- notifies the area's coordination channel with the barrier's name, and stays readable until
-- the barrier expires. Raises no_data_found naming the barrier when no live barrier has the
-- name.
CREATE OR REPLACE FUNCTION {{t:barrier_arrive}}(name text) RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $arrive$
DECLARE
  c {{t:coordination}}%ROWTYPE;
BEGIN
  PERFORM pg_advisory_xact_lock({{coordination_lock_class}}, hashtext(chr(31) || name));
  SELECT * INTO c FROM {{t:coordination}} x
   WHERE x.name = barrier_arrive.name AND x.kind = 'barrier' AND x.expires_at > now();
  IF NOT FOUND THEN
    RAISE EXCEPTION 'no barrier "%" (never created, or expired)', name
      USING ERRCODE = 'no_data_found';
  END IF;
  IF c.released_at IS NOT NULL THEN
    RETURN true;
  END IF;
  UPDATE {{t:coordination}} x
     SET used = x.used + 1, updated_at = now(),
         released_at = CASE WHEN x.used + 1 >= x.capacity THEN now() END
   WHERE x.name = barrier_arrive.name
  RETURNING * INTO c;
  IF c.released_at IS NOT NULL THEN
    PERFORM pg_notify({{coordination_channel}}, name);
    RETURN true;
  END IF;
  RETURN false;
END
$arrive$;
