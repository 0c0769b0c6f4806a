-- What each subrequest came to and the response summary, written before
-- the terminal transition. $1 request_id, $2 received_at (Unix µs),
-- $3 lease_token, $4 dispatch_outcomes (JSON), $5 response_summary (JSON).
UPDATE message_inbox
SET dispatch_outcomes = $4::jsonb, response_summary = $5::jsonb,
    updated_at = now()
WHERE request_id = $1::uuid
  AND received_at = timestamptz 'epoch' + $2::bigint * interval '1 microsecond'
  AND lease_token = $3::bigint
RETURNING 1
