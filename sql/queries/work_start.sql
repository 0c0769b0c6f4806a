-- Sessions start on held work items: 'running', one more attempt, lease
-- extended. Fenced: an item whose lease token no longer matches returns no
-- row. One statement for a batch.
-- $1 uuid[] work_id, $2 int8[] lease_token, $3 int8[] lease seconds.
-- Returns work_id and attempts of each item that started.
UPDATE route_work w
SET state = 'running',
    started_at = coalesce(w.started_at, now()),
    attempts = w.attempts + 1,
    lease_expires_at = now() + make_interval(secs => t.lease_s)
FROM unnest($1::uuid[], $2::int8[], $3::int8[])
       AS t(work_id, lease_token, lease_s)
WHERE w.work_id = ANY($1::uuid[])
  AND w.work_id = t.work_id AND w.lease_token = t.lease_token
  AND CASE w.state WHEN 'queued' THEN true WHEN 'running' THEN true
        ELSE false END
RETURNING w.work_id::text, w.attempts
