-- GET /api/requests: requests newest first, one page of them with the
-- number of all that match, as {"items":[...],"total":N}. $1 offset, $2
-- limit, $3 a prefix of the request id ('' for any), $4 lifecycle_state (''
-- for any).
WITH picked AS (
  SELECT m.request_id, m.received_at, m.completed_at, m.lifecycle_state,
         m.error_class, m.attempts, m.source_channel,
         m.source_sender_identity
  FROM message_inbox m
  WHERE ($3::text = '' OR starts_with(m.request_id::text, lower($3::text)))
    AND ($4::text = '' OR m.lifecycle_state = $4::text)
), page AS (
  SELECT * FROM picked
  ORDER BY received_at DESC, request_id
  OFFSET $1::bigint LIMIT $2::bigint
)
SELECT jsonb_build_object(
  'total', (SELECT count(*) FROM picked),
  'items', coalesce((
    SELECT jsonb_agg(jsonb_build_object(
             'request_id', p.request_id,
             'received_at', p.received_at,
             'completed_at', p.completed_at,
             'lifecycle_state', p.lifecycle_state,
             'error_class', p.error_class,
             'attempts', p.attempts,
             'source_channel', p.source_channel,
             'sender', p.source_sender_identity,
             'butlers', coalesce((
               SELECT jsonb_agg(DISTINCT l.butler)
               FROM fanout_execution_log l
               WHERE l.request_id = p.request_id), '[]'))
             ORDER BY p.received_at DESC, p.request_id)
    FROM page p), '[]')
)::text
