-- One approval request. $1 approval_id. Returns run_id, butler, tool,
-- summary, status, expires_at (Unix ms), requester channel, endpoint,
-- sender and thread, answered_by, notice_ref, answer_key; or no row.
SELECT run_id, butler, tool, summary, status,
       (extract(epoch FROM expires_at) * 1000)::bigint,
       requester_channel, requester_endpoint, requester_sender,
       requester_thread, coalesce(answered_by, ''), notice_ref, answer_key
FROM approvals
WHERE approval_id = $1::uuid
