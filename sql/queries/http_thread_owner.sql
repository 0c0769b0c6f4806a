-- The HTTP API's check of a sender-scoped thread credential: the sender
-- who started thread $1 (of its first run; '' when that run named none).
-- No row: the thread has no run yet.
SELECT COALESCE(sender, '')
FROM thread_runs
WHERE thread_id = $1
ORDER BY created_at, run_id
LIMIT 1
