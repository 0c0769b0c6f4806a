-- Pending approval requests, oldest first (the dashboard). $1 limit.
-- Returns approval_id, run_id, butler, tool, summary, requester channel
-- and sender, created_at and expires_at (Unix ms).
SELECT approval_id::text, run_id, butler, tool, summary, requester_channel,
       requester_sender, (extract(epoch FROM created_at) * 1000)::bigint,
       (extract(epoch FROM expires_at) * 1000)::bigint
FROM approvals
WHERE status = 'pending'
ORDER BY created_at
LIMIT $1::int
