-- Clean shutdown: hands held work items back at once. Their lease ends now
-- and has no owner, so recovery on any node (a restart or a peer) takes
-- them over at its next tick instead of after `lease_s`. Fenced: an item
-- whose lease token no longer matches (it passed to another holder) or
-- that is terminal is untouched. The state stays; recovery re-queues it.
-- $1 uuid[] work_id, $2 int8[] lease_token. Returns each released work_id.
UPDATE route_work w
SET lease_owner = NULL,
    lease_expires_at = now()
FROM unnest($1::uuid[], $2::int8[]) AS t(work_id, lease_token)
WHERE w.work_id = ANY($1::uuid[])
  AND w.work_id = t.work_id AND w.lease_token = t.lease_token
  AND CASE w.state WHEN 'queued' THEN true WHEN 'running' THEN true
        ELSE false END
RETURNING w.work_id::text
