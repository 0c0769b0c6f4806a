-- Records an outbound send as 'sending' before it goes out (a key already
-- 'sent' or 'skipped' stays so) and answers what the key held before, and,
-- for a reaction, the highest-ranked reaction of the request that is not
-- dead, this one included (runtime/delivery_services.hpp, decide_send).
-- $1 request_id, $2 segment_id, $3 part, $4 adapter, $5 kind, $6 rank,
-- $7 value.
-- Returns: prior state ('' = none), prior provider_id, top rank, top value.
-- A request that was forgotten (runtime/forget.md) records nothing and
-- answers 'skipped': what it still owed the person is not sent.
WITH gone AS (
  SELECT 1 FROM forget_tombstones WHERE request_id = $1::uuid
), prior AS (
  SELECT state, provider_id FROM outbound_ledger
  WHERE request_id = $1::uuid AND segment_id = $2::text AND part = $3::text
), up AS (
  INSERT INTO outbound_ledger AS l
    (request_id, segment_id, part, adapter, kind, rank, value, state)
  SELECT $1::uuid, $2::text, $3::text, $4::text, $5::text, $6::bigint,
         $7::text, 'sending'
  WHERE NOT EXISTS (SELECT 1 FROM gone)
  ON CONFLICT (request_id, segment_id, part) DO UPDATE
  SET attempts = l.attempts + 1,
      state = CASE WHEN l.state IN ('sent', 'skipped') THEN l.state
                   ELSE 'sending' END,
      updated_at = now()
  RETURNING 1
), top AS (
  SELECT r.rank, r.value FROM (
    SELECT rank, value FROM outbound_ledger
    WHERE $5::text = 'reaction' AND request_id = $1::uuid
      AND kind = 'reaction' AND state <> 'dead'
    UNION ALL
    SELECT $6::bigint, $7::text
  ) r
  ORDER BY r.rank DESC
  LIMIT 1
)
SELECT CASE WHEN EXISTS (SELECT 1 FROM gone) THEN 'skipped'
            ELSE coalesce((SELECT state FROM prior), '') END,
       coalesce((SELECT provider_id FROM prior), ''),
       (SELECT rank FROM top),
       (SELECT value FROM top),
       (SELECT count(*) FROM up)
