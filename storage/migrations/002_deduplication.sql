-- Troupe migration 2: deduplication keys. A publish with a deduplication key claims the key
-- (queue, key) for its message until expires_at; a publish of a live key returns the stored
-- message instead of publishing. Rows are kept after their queue rows are purged (a purge does
-- not free a live key), replaced when their key is published again after expiry, and removed
-- in batches by the janitor once expired.
CREATE TABLE IF NOT EXISTS {{t:deduplication}} (
  queue_name   text        NOT NULL,
  key          text        NOT NULL CHECK (key <> ''),
  message_id   uuid        NOT NULL,
  -- the message as published (envelope with its delay), returned to duplicate publishers
  message      jsonb       NOT NULL,
  claimed_at   timestamptz NOT NULL,
  expires_at   timestamptz NOT NULL,
  -- a random number per publishing call: tells the caller that claimed the key from one that
  -- found it live
  claim_token  bigint      NOT NULL,
  PRIMARY KEY (queue_name, key)
);

CREATE INDEX IF NOT EXISTS {{n:deduplication_expiry_idx}} ON {{t:deduplication}} (expires_at);
