-- Extends the leases of held work items. Fenced: an item whose lease token
-- no longer matches (or that is terminal) returns no row. One statement for
-- a batch. $1 uuid[] work_id, $2 int8[] lease_token, $3 int8[] lease
-- seconds. Returns the work_id of each renewed item.
UPDATE route_work w
SET lease_expires_at = now() + make_interval(secs => t.lease_s)
FROM unnest($1::uuid[], $2::int8[], $3::int8[])
       AS t(work_id, lease_token, lease_s)
WHERE w.work_id = ANY($1::uuid[])
  AND w.work_id = t.work_id AND w.lease_token = t.lease_token
  AND CASE w.state WHEN 'queued' THEN true WHEN 'running' THEN true
        ELSE false END
RETURNING w.work_id::text
