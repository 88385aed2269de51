-- Statements of the migrator. The versions table is created before any migration runs.

-- name: create_versions_table
CREATE TABLE IF NOT EXISTS {{t:versions}} (
  version     integer     PRIMARY KEY,
  name        text        NOT NULL,
  applied_at  timestamptz NOT NULL DEFAULT now()
)

-- name: migration_lock
-- Serializes concurrent migrators of one area for the rest of the transaction.
SELECT pg_advisory_xact_lock({{lock_class}}, 0)

-- name: applied_versions
SELECT version FROM {{t:versions}} ORDER BY version

-- name: record_version
INSERT INTO {{t:versions}} (version, name) VALUES ($1, $2) ON CONFLICT (version) DO NOTHING

-- name: area_exists
-- Whether the area's versions table exists (NULL when it does not).
SELECT to_regclass($1)::text
