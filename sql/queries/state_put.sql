-- Writes a butler's state value (tool state_put). $1 butler, $2 scope, $3
-- key, $4 value (JSON text), $5 expected version: -1 any (upsert), 0 only
-- if absent, N only if the stored version is N (compare-and-set; of two
-- such writes at once exactly one matches, the other finds N+1).
-- $6 the calling session's request: a run still in flight when its person
-- was forgotten (runtime/forget.md) writes nothing (answered 0).
-- Returns the new version, or 0 when the expectation did not hold.
WITH gone AS (
  SELECT 1 FROM forget_tombstones WHERE request_id = $6::uuid
), upd AS (
  UPDATE butler_state
  SET value = $4::jsonb, version = version + 1, updated_at = now()
  WHERE butler = $1::text AND scope = $2::text AND key = $3::text
    AND $5::bigint > 0 AND version = $5::bigint
    AND NOT EXISTS (SELECT 1 FROM gone)
  RETURNING version
), ins AS (
  INSERT INTO butler_state AS s (butler, scope, key, value)
  SELECT $1::text, $2::text, $3::text, $4::jsonb
  WHERE $5::bigint <= 0 AND NOT EXISTS (SELECT 1 FROM gone)
  ON CONFLICT (butler, scope, key) DO UPDATE
  SET value = EXCLUDED.value, version = s.version + 1, updated_at = now()
  WHERE $5::bigint = -1
  RETURNING version
)
SELECT coalesce((SELECT version FROM upd), (SELECT version FROM ins), 0)
