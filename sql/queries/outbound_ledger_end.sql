-- Records the outcome of an outbound send after it: 'sent' with the
-- provider's id, or 'skipped' (a reaction superseded before it went out).
-- Answers the key's state before this record and, for a reaction, the
-- highest-ranked reaction of the request that is not dead: one that
-- outranks this one arrived meanwhile and must be set again after it.
-- $1 request_id, $2 segment_id, $3 part, $4 state ('sent' | 'skipped'),
-- $5 provider_id ('' = none), $6 kind.
-- Returns: prior state ('' = none), top rank, top value.
WITH prior AS (
  SELECT state FROM outbound_ledger
  WHERE request_id = $1::uuid AND segment_id = $2::text AND part = $3::text
), up AS (
  UPDATE outbound_ledger
  SET state = $4::text, provider_id = NULLIF($5::text, ''), updated_at = now()
  WHERE request_id = $1::uuid AND segment_id = $2::text AND part = $3::text
  RETURNING 1
), top AS (
  SELECT rank, value FROM outbound_ledger
  WHERE $6::text = 'reaction' AND request_id = $1::uuid
    AND kind = 'reaction' AND state <> 'dead'
  ORDER BY rank DESC
  LIMIT 1
)
SELECT coalesce((SELECT state FROM prior), ''),
       coalesce((SELECT rank FROM top), 0),
       coalesce((SELECT value FROM top), ''),
       (SELECT count(*) FROM up)
