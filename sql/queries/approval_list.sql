-- GET /api/approvals: the questions still waiting for their answer, the
-- oldest first, one page of them with the number of all that wait, as
-- {"items":[...],"total":N}. $1 offset, $2 limit, $3 a butler's name or ''
-- (any). A question past its expiry is left out: its timer (or the sweep)
-- denies it.
WITH picked AS (
  SELECT a.*
  FROM approvals a
  WHERE a.status = 'pending' AND a.expires_at > now()
    AND ($3::text = '' OR a.butler = $3::text)
), page AS (
  SELECT * FROM picked
  ORDER BY created_at, approval_id
  OFFSET $1::bigint LIMIT $2::bigint
)
SELECT jsonb_build_object(
  'total', (SELECT count(*) FROM picked),
  'items', coalesce((
    SELECT jsonb_agg(jsonb_build_object(
             'approval_id', p.approval_id,
             'run_id', p.run_id,
             'butler', p.butler,
             'tool', p.tool,
             'summary', p.summary,
             'requester_channel', p.requester_channel,
             'requester_endpoint', p.requester_endpoint,
             'requester_sender', p.requester_sender,
             'requester_thread', p.requester_thread,
             'created_at', p.created_at,
             'expires_at', p.expires_at,
             'expires_at_unix_ms',
               (extract(epoch FROM p.expires_at) * 1000)::bigint)
             ORDER BY p.created_at, p.approval_id)
    FROM page p), '[]')
)::text
