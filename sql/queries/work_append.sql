-- Stores the work items butlers accepted, each leased at once by its
-- accepting node, or finds an item already stored under the same (butler,
-- request_id, segment_id): route.v1 dispatch is at-least-once (spec 001
-- §10.1). One statement for a batch; the caller passes each key once.
-- $1 uuid[] work_id, $2 text[] butler, $3 uuid[] request_id, $4 text[]
-- segment_id, $5 text[] subrequest_id (NULL = none), $6 text[]
-- trigger_source, $7 text[] origin_butler (NULL = none), $8 text[]
-- envelope, $9 text[] lease owner, $10 int8[] lease seconds, $11 int8[]
-- 1 when the item's session starts at once (stored 'running', started_at
-- now, its first attempt counted: the start write it saves), else 0.
-- Returns per item found or stored: the stored work_id, lease_token,
-- attempts, created_at (Unix µs), whether it is new, its state and (for a
-- duplicate) final response, and the work_id the caller proposed. An item
-- inserted concurrently after this statement's snapshot returns no row.
WITH t AS (
  SELECT *
  FROM unnest($1::uuid[], $2::text[], $3::uuid[], $4::text[], $5::text[],
              $6::text[], $7::text[], $8::text[], $9::text[], $10::int8[],
              $11::int8[])
    AS t(work_id, butler, request_id, segment_id, subrequest_id,
         trigger_source, origin_butler, envelope, owner, lease_s, start)
), ins AS (
  INSERT INTO route_work (work_id, butler, request_id, segment_id,
                          subrequest_id, trigger_source, origin_butler,
                          envelope, lease_owner, lease_expires_at, state,
                          attempts, started_at)
  SELECT work_id, butler, request_id, segment_id, subrequest_id,
         trigger_source, origin_butler, envelope::json, owner,
         now() + make_interval(secs => lease_s),
         CASE WHEN start <> 0 THEN 'running' ELSE 'queued' END,
         CASE WHEN start <> 0 THEN 1 ELSE 0 END,
         CASE WHEN start <> 0 THEN now() END
  FROM t
  ON CONFLICT (butler, request_id, segment_id) DO NOTHING
  RETURNING work_id, lease_token, attempts, created_at, state
)
SELECT work_id::text, lease_token, attempts,
       (extract(epoch FROM created_at) * 1000000)::bigint, true, state,
       ''::text, work_id::text
FROM ins
UNION ALL
SELECT r.work_id::text, r.lease_token, r.attempts,
       (extract(epoch FROM r.created_at) * 1000000)::bigint, false, r.state,
       coalesce(r.response::text, ''), t.work_id::text
FROM t JOIN route_work r
  ON r.butler = t.butler AND r.request_id = t.request_id
 AND r.segment_id = t.segment_id
WHERE r.request_id = ANY($3::uuid[])
  AND NOT EXISTS (SELECT 1 FROM ins WHERE ins.work_id = t.work_id)
