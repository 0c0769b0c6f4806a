-- A thread's runs that are not finished, oldest first, with the text of the
-- user message that started each: what a resumed thread actor picks up
-- after its node went down. $1 thread_id.
SELECT r.run_id::text, r.butler, r.state, COALESCE(t.body, ''),
       COALESCE(t.message_id, '')
FROM thread_runs r
LEFT JOIN thread_transcript t
  ON t.run_id = r.run_id AND t.role = 'user' AND t.kind IN ('start', 'queued')
WHERE r.thread_id = $1 AND r.state IN ('queued', 'accepted', 'running')
ORDER BY r.created_at, r.run_id
