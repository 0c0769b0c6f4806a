-- Recovery: leases open work items of one butler whose holder is gone
-- (lease expired) — or, with $5 (a "NODE/" prefix, '' for none), every
-- open item an earlier incarnation on this node held — to owner $2 with a
-- new fencing token, oldest first.
-- $1 butler, $2 owner, $3 lease seconds, $4 limit, $5 own prefix.
UPDATE route_work w
SET lease_owner = $2,
    lease_expires_at = now() + make_interval(secs => $3),
    lease_token = w.lease_token + 1,
    state = 'queued'
FROM (
  SELECT work_id FROM route_work
  WHERE butler = $1 AND state IN ('queued', 'running')
    AND (lease_expires_at < now()
         OR ($5 <> '' AND left(lease_owner, length($5)) = $5
             AND lease_owner <> $2))
  ORDER BY work_id
  LIMIT $4
  FOR UPDATE SKIP LOCKED
) c
WHERE w.work_id = c.work_id
RETURNING w.work_id::text, w.butler, w.request_id::text, w.segment_id,
          w.trigger_source, coalesce(w.origin_butler, ''), w.envelope::text,
          w.lease_token, w.attempts,
          (extract(epoch FROM w.created_at) * 1000000)::bigint
