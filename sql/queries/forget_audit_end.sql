-- forget: completes audit row $1 with state $2 ('done' | 'failed'), the
-- counts per table $3 (JSON object) and their total $4.
UPDATE forget_audit
SET finished_at = now(), state = $2, counts = $3::jsonb, total = $4::bigint
WHERE id = $1::bigint
