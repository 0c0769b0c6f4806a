-- GET /v1/threads/{id}: thread $1 as one row of thread_list, then its open
-- runs (collecting, queued, accepted, running) oldest first as a JSON
-- array of {run_id, butler, state}, then the approval questions its runs
-- put on its stream that still wait for their answer (not past their
-- expiry), oldest first, as the `approval` events say them. No row: no
-- such thread.
SELECT t.thread_id,
       ((extract(epoch FROM t.last_message_at) * 1000000))::bigint,
       f.body, l.body, r.state, r.error_class, r.error_message, l.cursor,
       COALESCE((SELECT json_agg(json_build_object(
                   'run_id', o.run_id, 'butler', o.butler, 'state', o.state)
                   ORDER BY o.created_at, o.run_id)
                 FROM thread_runs o
                 WHERE o.thread_id = t.thread_id
                   AND o.state IN ('collecting', 'queued', 'accepted',
                                   'running')), '[]')::text,
       COALESCE((SELECT json_agg(json_build_object(
                   'approval_id', a.approval_id, 'run_id', a.run_id,
                   'tool', a.tool, 'summary', a.summary, 'status', a.status,
                   'expires_at_unix_ms',
                   (extract(epoch FROM a.expires_at) * 1000)::bigint)
                   ORDER BY a.created_at, a.approval_id)
                 FROM approvals a
                 WHERE a.status = 'pending' AND a.expires_at > now()
                   AND a.requester_channel = 'api'
                   AND a.requester_thread = t.thread_id), '[]')::text
FROM threads t
LEFT JOIN LATERAL (
  SELECT left(body, 512) AS body FROM thread_transcript
  WHERE thread_id = t.thread_id AND role = 'user'
  ORDER BY cursor LIMIT 1) f ON true
LEFT JOIN LATERAL (
  SELECT left(body, 512) AS body, cursor FROM thread_transcript
  WHERE thread_id = t.thread_id
  ORDER BY cursor DESC LIMIT 1) l ON true
LEFT JOIN LATERAL (
  SELECT state, error_class, left(error_message, 512) AS error_message
  FROM thread_runs
  WHERE thread_id = t.thread_id
  ORDER BY state = 'queued', created_at DESC, run_id DESC LIMIT 1) r ON true
WHERE t.thread_id = $1
