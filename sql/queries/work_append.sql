-- Stores a work item accepted by a butler, leased at once by the accepting
-- node, or finds the item already stored under the same (butler,
-- request_id, segment_id): route.v1 dispatch is at-least-once (spec 001
-- §10.1). $1 work_id, $2 butler, $3 request_id, $4 segment_id,
-- $5 subrequest_id ('' = none), $6 trigger_source, $7 origin_butler
-- ('' = none), $8 envelope, $9 lease owner, $10 lease seconds.
-- Returns the stored item, whether it was new, and (for a duplicate) its
-- state and final response.
WITH ins AS (
  INSERT INTO route_work (work_id, butler, request_id, segment_id,
                          subrequest_id, trigger_source, origin_butler,
                          envelope, lease_owner, lease_expires_at)
  VALUES ($1::uuid, $2, $3::uuid, $4, NULLIF($5, ''), $6, NULLIF($7, ''),
          $8::json, $9, now() + make_interval(secs => $10))
  ON CONFLICT (butler, request_id, segment_id) DO NOTHING
  RETURNING work_id, lease_token, attempts, created_at, true AS fresh
)
SELECT work_id::text, lease_token, attempts,
       (extract(epoch FROM created_at) * 1000000)::bigint, fresh,
       'queued'::text, ''::text
FROM ins
UNION ALL
SELECT work_id::text, lease_token, attempts,
       (extract(epoch FROM created_at) * 1000000)::bigint, false, state,
       coalesce(response::text, '')
FROM route_work
WHERE butler = $2 AND request_id = $3::uuid AND segment_id = $4
  AND NOT EXISTS (SELECT 1 FROM ins)
