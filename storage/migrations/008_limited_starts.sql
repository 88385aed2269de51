-- Troupe migration 8: a message taken under limits starts at the instant its limits counted
-- it. A claim takes the slots of such a message (limit_take, called by claim_limited) at one
-- reading of the database's clock, after its keys' locks: a bucket counts the message in the
-- window of that instant, a window limiter holds its acquisition from that instant on. The
-- instant is left in the transaction's setting troupe.limited_starts ({message id: instant}),
-- and claim_mark writes it as the message's started_at. Before, the row's start was the claim
-- transaction's start, a few milliseconds earlier: a claim that began just before a window's
-- end and took its slot after it showed its start in the window before the one that counted
-- it. A guard's acquisition (no message) reads the clock as before.
-- Locks: none beyond the function's replacement.
CREATE OR REPLACE FUNCTION {{t:limit_take}}(scope text, name text, kind text, capacity integer,
                                            window_ms bigint, holder text, node integer,
                                            message_id uuid, expires_at timestamptz)
RETURNS void LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $take$
#variable_conflict use_column
DECLARE
  start timestamptz;
  at timestamptz := clock_timestamp();
  starts jsonb;
BEGIN
  -- Every limit of one message counts it at the same instant: the first one's.
  IF limit_take.message_id IS NOT NULL THEN
    starts := coalesce(nullif(current_setting('troupe.limited_starts', true), '')::jsonb, '{}');
    IF starts ? limit_take.message_id::text THEN
      at := (starts->>limit_take.message_id::text)::timestamptz;
    ELSE
      PERFORM set_config('troupe.limited_starts',
                         (starts || jsonb_build_object(limit_take.message_id::text, at))::text,
                         true);
    END IF;
  END IF;
  IF scope = '' THEN
    start := CASE WHEN kind = 'bucket' THEN to_timestamp(
               floor(extract(epoch FROM at) * 1000 / window_ms) * window_ms / 1000.0)
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
    VALUES (scope, limit_take.name, holder, node, limit_take.message_id, limit_take.expires_at)
    ON CONFLICT DO NOTHING;
  ELSIF kind = 'window' THEN
    INSERT INTO {{t:coordination_holds}} (scope, name, holder, expires_at)
    VALUES (scope, limit_take.name, gen_random_uuid()::text,
            at + window_ms * interval '1 millisecond');
  END IF;
END
$take$;
