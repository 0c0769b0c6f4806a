-- Work items' terminal results: 'ok', 'error' or 'cancelled' with the
-- route_response.v1 each session produced. Fenced: a holder whose lease
-- passed to someone else (token mismatch) writes nothing and gets no row.
-- One statement for a batch; found with `= ANY` on the primary key, and
-- the state test is a CASE so that the open-items partial index stays out
-- of the plan (see inbox_claim.sql). $1 uuid[] work_id, $2 int8[] lease_token,
-- $3 text[] state, $4 text[] response, $5 text[] error class (NULL = none).
-- Returns the work_id of each finished item.
UPDATE route_work w
SET state = t.state,
    finished_at = now(),
    response = t.response::json,
    error_class = t.error_class,
    lease_owner = NULL,
    lease_expires_at = NULL
FROM unnest($1::uuid[], $2::int8[], $3::text[], $4::text[], $5::text[])
       AS t(work_id, lease_token, state, response, error_class)
WHERE w.work_id = ANY($1::uuid[])
  AND w.work_id = t.work_id AND w.lease_token = t.lease_token
  AND CASE w.state WHEN 'queued' THEN true WHEN 'running' THEN true
        ELSE false END
RETURNING w.work_id::text
