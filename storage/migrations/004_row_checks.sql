-- Troupe migration 4: every value a claim, the eta probe or the statistics read from a queue row
-- is constrained, so that one bad row (written by hand, by a producer in another language or by
-- a bad migration) can never make every claim of its queue fail. A bad insert or update now
-- fails itself, with the name of the constraint it breaks; the rest of the queue goes on.
--   eta, enqueued_at   finite (an infinite timestamp cannot be ordered against now(), nor turned
--                      into milliseconds)
--   attempts           0 to 1,000,000,000 (a claim adds one up to that bound)
--   queue_name         1 to 47 bytes (a queue name's limit); task_name 1 to 255 bytes
-- Rows already in the table that break a rule are quarantined first: a queued or running row is
-- marked failed with a failure record of type troupe::bad_row that names the column and its
-- value, and the column is set to a value the rule allows (now() for a timestamp, the nearest
-- bound for a count; a name is cut to its limit). Finished rows only get the value fixed.
-- The migration reads the whole queue table twice (the quarantine, then the checks' validation),
-- under the lock that adding a check takes, held from its start to its commit.
DO $troupe$
DECLARE
  fixed bigint;
BEGIN
  IF EXISTS (SELECT FROM pg_constraint
              WHERE conrelid = '{{t:queue}}'::regclass
                AND conname = trim(BOTH '"' FROM '{{n:queue_eta_finite}}')) THEN
    RETURN; -- applied already (a script run again)
  END IF;
  -- Nothing is written between the quarantine and the checks: the lock that adding a check
  -- takes anyway, taken first.
  LOCK TABLE {{t:queue}} IN ACCESS EXCLUSIVE MODE;
  WITH bad AS (
    SELECT q.message_id,
           concat_ws('; ',
             CASE WHEN NOT isfinite(q.eta) THEN format('column eta holds %s', q.eta) END,
             CASE WHEN NOT isfinite(q.enqueued_at)
                  THEN format('column enqueued_at holds %s', q.enqueued_at) END,
             CASE WHEN q.attempts NOT BETWEEN 0 AND 1000000000
                  THEN format('column attempts holds %s', q.attempts) END,
             CASE WHEN octet_length(q.queue_name) NOT BETWEEN 1 AND 47
                  THEN format('column queue_name is %s bytes long', octet_length(q.queue_name)) END,
             CASE WHEN octet_length(q.task_name) NOT BETWEEN 1 AND 255
                  THEN format('column task_name is %s bytes long', octet_length(q.task_name)) END)
             AS fault
      FROM {{t:queue}} q
     WHERE NOT isfinite(q.eta) OR NOT isfinite(q.enqueued_at)
        OR q.attempts NOT BETWEEN 0 AND 1000000000
        OR octet_length(q.queue_name) NOT BETWEEN 1 AND 47
        OR octet_length(q.task_name) NOT BETWEEN 1 AND 255)
  UPDATE {{t:queue}} q
     SET eta = CASE WHEN isfinite(q.eta) THEN q.eta ELSE now() END,
         enqueued_at = CASE WHEN isfinite(q.enqueued_at) THEN q.enqueued_at ELSE now() END,
         attempts = least(greatest(q.attempts, 0), 1000000000),
         queue_name = CASE WHEN q.queue_name = '' THEN '_'
                           ELSE left(q.queue_name, 47) END, -- characters: bytes cut below
         task_name = CASE WHEN q.task_name = '' THEN '_' ELSE left(q.task_name, 255) END,
         state = CASE WHEN q.state IN ('queued', 'running') THEN 'failed' ELSE q.state END,
         owner_node = CASE WHEN q.state IN ('queued', 'running') THEN NULL ELSE q.owner_node END,
         finished_at = CASE WHEN q.state IN ('queued', 'running') THEN now()
                            ELSE q.finished_at END,
         error = CASE WHEN q.state IN ('queued', 'running')
                      THEN jsonb_build_object(
                             'type', 'troupe::bad_row',
                             'text', 'quarantined by migration 4, no claim could read it: '
                                     || b.fault,
                             'time', to_char(now() AT TIME ZONE 'UTC',
                                             'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'),
                             'attempt', least(greatest(q.attempts, 0), 1000000000))
                      ELSE q.error END
    FROM bad b
   WHERE q.message_id = b.message_id;
  GET DIAGNOSTICS fixed = ROW_COUNT;
  -- Names of multi-byte characters cut to 47 or 255 characters may still be too long in bytes.
  UPDATE {{t:queue}}
     SET queue_name = left(queue_name, 11) WHERE octet_length(queue_name) > 47;
  UPDATE {{t:queue}}
     SET task_name = left(task_name, 63) WHERE octet_length(task_name) > 255;
  IF fixed > 0 THEN
    RAISE WARNING 'Troupe migration 4 quarantined % queue row(s) that no claim could read; '
                  'they are failed with a failure record of type troupe::bad_row', fixed;
  END IF;
  ALTER TABLE {{t:queue}}
    ADD CONSTRAINT {{n:queue_eta_finite}} CHECK (isfinite(eta)),
    ADD CONSTRAINT {{n:queue_enqueued_at_finite}} CHECK (isfinite(enqueued_at)),
    ADD CONSTRAINT {{n:queue_attempts_range}} CHECK (attempts BETWEEN 0 AND 1000000000),
    ADD CONSTRAINT {{n:queue_queue_name_length}} CHECK (octet_length(queue_name) BETWEEN 1 AND 47),
    ADD CONSTRAINT {{n:queue_task_name_length}} CHECK (octet_length(task_name) BETWEEN 1 AND 255);
END $troupe$;
