-- A thread's runs that are not finished, oldest first, each with the texts
-- of the user messages that make its input (the one that started or queued
-- it; for a run of collect mode, every turn collected for it), as a JSON
-- array in transcript order: what a resumed thread actor picks up after
-- its node went down, then the run's sender, model and max_steps ('' and
-- 0 when the turn left them to the butler), and the files of the turn that
-- started or queued it (references as JSON, '' for none). $1 thread_id.
SELECT r.run_id::text, r.butler, r.state,
       COALESCE((SELECT json_agg(t.body ORDER BY t.cursor)
                 FROM thread_transcript t
                 WHERE t.thread_id = r.thread_id AND t.run_id = r.run_id
                   AND t.role = 'user'
                   AND t.kind IN ('start', 'queued', 'collect')), '[]')::text,
       COALESCE(r.sender, ''), COALESCE(r.model, ''),
       COALESCE(r.max_steps, 0)::text, COALESCE(r.attachments::text, '')
FROM thread_runs r
WHERE r.thread_id = $1
  AND r.state IN ('collecting', 'queued', 'accepted', 'running')
ORDER BY r.created_at, r.run_id
