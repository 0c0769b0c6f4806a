-- Heartbeat of a claimed request while its subrequests run: extends the
-- lease if the token still matches. No row: the lease passed on.
-- $1 request_id, $2 received_at (Unix µs), $3 lease_token, $4 seconds.
UPDATE message_inbox
SET lease_expires_at = now() + make_interval(secs => $4::integer)
WHERE request_id = $1::uuid
  AND received_at = timestamptz 'epoch' + $2::bigint * interval '1 microsecond'
  AND lease_token = $3::bigint
  AND lifecycle_state = 'progress'
RETURNING 1
