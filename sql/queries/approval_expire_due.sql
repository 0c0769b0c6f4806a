-- Expires pending approval requests past their expiry that no running
-- session waits for any more (the tool server's sweep). Returns their ids.
UPDATE approvals
SET status = 'expired', answered_by = 'timeout', answered_at = now()
WHERE status = 'pending' AND expires_at < now() - interval '5 seconds'
RETURNING approval_id::text
