-- Troupe migration 3: the fetch index leads with a hash of the queue name instead of the name.
-- With every key column of fixed width, PostgreSQL reads each column of an index entry at a
-- known offset; after a text column it walks the entry for every column it compares, which
-- took 8 % of a bulk insert's server time. The key still ends in the message id, so every
-- key is unique and the deduplication pass a full page tries before it splits could never free
-- space: it is turned off. Claims name both the hash and the queue: two queues whose names hash
-- alike share a range of the index, and each claim skips the other's rows.
-- The index is rebuilt only while it is still the old one (a script run again leaves it alone),
-- inside this migration's transaction. DROP INDEX locks the queue table against every use until
-- the transaction ends; it comes first, so this migration never waits to strengthen a lock
-- it already holds.
DO $troupe$ BEGIN
  IF NOT EXISTS (SELECT FROM pg_index
                  WHERE indexrelid = to_regclass('{{schema}}.{{n:queue_fetch_idx}}')
                    AND indexprs IS NOT NULL) THEN
    DROP INDEX IF EXISTS {{schema}}.{{n:queue_fetch_idx}};
    CREATE INDEX {{n:queue_fetch_idx}}
      ON {{t:queue}} (hashtext(queue_name), priority, eta, message_id)
      WITH (deduplicate_items = off) WHERE state = 'queued';
  END IF;
END $troupe$;
