-- GET /api/dead-letters: dead-lettered subrequests newest first, one page
-- of them with the number of all that match, as {"items":[...],"total":N}.
-- $1 offset, $2 limit, $3 'open' (not replayed since), 'replayed' or ''
-- (any).
WITH picked AS (
  SELECT d.*
  FROM dead_letters d
  WHERE $3::text = ''
     OR ($3::text = 'open' AND d.replayed_at IS NULL)
     OR ($3::text = 'replayed' AND d.replayed_at IS NOT NULL)
), page AS (
  SELECT * FROM picked
  ORDER BY created_at DESC, request_id, segment_id
  OFFSET $1::bigint LIMIT $2::bigint
)
SELECT jsonb_build_object(
  'total', (SELECT count(*) FROM picked),
  'items', coalesce((
    SELECT jsonb_agg(jsonb_build_object(
             'request_id', p.request_id,
             'segment_id', p.segment_id,
             'butler', p.butler,
             'error_class', p.error_class,
             'error_message', p.error_message,
             'attempts', p.attempts,
             'created_at', p.created_at,
             'replayed_at', p.replayed_at,
             'replay_count', p.replay_count,
             'lifecycle_state', (SELECT m.lifecycle_state FROM message_inbox m
                                 WHERE m.request_id = p.request_id))
             ORDER BY p.created_at DESC, p.request_id, p.segment_id)
    FROM page p), '[]')
)::text
