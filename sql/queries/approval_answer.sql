-- Answers a pending approval request. $1 approval_id, $2 status
-- (approved, denied or expired), $3 who answered, $4 the dedupe key of the
-- message that answered ('' when none). Returns the new status, or no row
-- when it was no longer pending.
UPDATE approvals
SET status = $2::text, answered_by = $3::text, answered_at = now(),
    answer_key = $4::text
WHERE approval_id = $1::uuid AND status = 'pending'
RETURNING status
