-- forget (runtime/forget.md): every request id that derives from sender
-- ($1 channel, $2 identity): its inbox requests, its thread runs (thread
-- API runs are channel 'api', sender NULL meaning 'api'), its reminders
-- (whose work items take the reminder's id), and work items routed
-- directly (POST /v1/butlers/{name}/route) whose envelope names it; and
-- whatever is left of any request forgotten before (a run that was in
-- flight then may have stored its delivery since).
-- A read; scans route_work's envelopes (a forget is rare).
SELECT request_id::text FROM message_inbox
WHERE source_channel = $1 AND source_sender_identity = $2
UNION
SELECT run_id::text FROM thread_runs
WHERE $1 = 'api' AND coalesce(sender, 'api') = $2
UNION
SELECT reminder_id::text FROM butler_reminders
WHERE source_channel = $1 AND source_sender = $2
UNION
SELECT request_id::text FROM route_work
WHERE json_extract_path_text(envelope, 'request_context', 'source_channel') = $1
  AND json_extract_path_text(envelope, 'request_context',
                             'source_sender_identity') = $2
UNION
SELECT w.request_id::text FROM route_work w
JOIN forget_tombstones t ON t.request_id = w.request_id
UNION
SELECT r.run_id::text FROM thread_runs r
JOIN forget_tombstones t ON t.request_id = r.run_id
