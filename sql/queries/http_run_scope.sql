-- The HTTP API's check of a scoped thread credential on a run's route: the
-- thread of run $1 (a UUID) and the sender who started that thread. No row:
-- no such run.
SELECT r.thread_id, COALESCE(f.sender, '')
FROM thread_runs r
LEFT JOIN LATERAL (
  SELECT sender FROM thread_runs
  WHERE thread_id = r.thread_id
  ORDER BY created_at, run_id LIMIT 1) f ON true
WHERE r.run_id = $1::uuid
