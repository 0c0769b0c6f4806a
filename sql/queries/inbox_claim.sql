-- Claims a batch of rows for processing: 'accepted', or 'progress' whose
-- lease expired, → 'progress' with a lease for $3 of $4 seconds and a new
-- fencing token. A row held by someone else, or terminal, is skipped.
-- $1: uuid[] request ids, $2: bigint[] received_at (Unix µs).
WITH c AS (
  SELECT t.request_id,
         timestamptz 'epoch' + t.received_us * interval '1 microsecond'
           AS received_at
  FROM unnest($1::uuid[], $2::bigint[]) AS t(request_id, received_us)
), claimed AS (
  UPDATE message_inbox m
  SET lifecycle_state = 'progress',
      lease_owner = $3,
      lease_token = m.lease_token + 1,
      lease_expires_at = now() + make_interval(secs => $4),
      attempts = m.attempts + 1,
      progress_at = now(),
      updated_at = now()
  FROM c
  WHERE m.request_id = c.request_id AND m.received_at = c.received_at
    AND (m.lifecycle_state = 'accepted'
         OR (m.lifecycle_state = 'progress' AND m.lease_expires_at < now()))
  RETURNING m.request_id, m.lease_token, m.attempts
), logged AS (
  INSERT INTO inbox_transitions (request_id, from_state, to_state, lease_owner)
  SELECT request_id,
         CASE WHEN attempts > 1 THEN 'progress' ELSE 'accepted' END,
         'progress', $3
  FROM claimed
)
SELECT request_id::text, lease_token FROM claimed
