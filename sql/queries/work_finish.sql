-- A work item's terminal result: 'ok', 'error' or 'cancelled' with the
-- route_response.v1 the session produced. Fenced: a holder whose lease
-- passed to someone else (token mismatch) writes nothing.
-- $1 work_id, $2 lease_token, $3 state, $4 response, $5 error class
-- ('' = none).
UPDATE route_work
SET state = $3,
    finished_at = now(),
    response = $4::json,
    error_class = NULLIF($5, ''),
    lease_owner = NULL,
    lease_expires_at = NULL
WHERE work_id = $1::uuid AND lease_token = $2
  AND state IN ('queued', 'running')
RETURNING 1
