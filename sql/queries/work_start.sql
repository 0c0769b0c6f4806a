-- A session starts on a held work item: 'running', one more attempt, lease
-- extended. Fenced: no row when the lease token no longer matches.
-- $1 work_id, $2 lease_token, $3 lease seconds.
UPDATE route_work
SET state = 'running',
    started_at = coalesce(started_at, now()),
    attempts = attempts + 1,
    lease_expires_at = now() + make_interval(secs => $3)
WHERE work_id = $1::uuid AND lease_token = $2
  AND state IN ('queued', 'running')
RETURNING attempts
