-- Heartbeat of a held work item (pending or running): extends its lease.
-- Fenced: no row when the lease passed to someone else.
-- $1 work_id, $2 lease_token, $3 lease seconds.
UPDATE route_work
SET lease_expires_at = now() + make_interval(secs => $3)
WHERE work_id = $1::uuid AND lease_token = $2
  AND state IN ('queued', 'running')
RETURNING 1
