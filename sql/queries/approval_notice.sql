-- Records where an approval request was put to its person. $1
-- approval_id, $2 notice_ref.
UPDATE approvals SET notice_ref = $2::text WHERE approval_id = $1::uuid
