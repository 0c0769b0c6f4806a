-- A run's state changes: $1 run_id, $2 state, $3 work_id ('' = keep),
-- $4 error_class ('' = none), $5 error_message ('' = none).
UPDATE thread_runs
SET state = $2,
    work_id = COALESCE(NULLIF($3, '')::uuid, work_id),
    error_class = NULLIF($4, ''),
    error_message = NULLIF($5, ''),
    updated_at = now()
WHERE run_id = $1::uuid
RETURNING 1
