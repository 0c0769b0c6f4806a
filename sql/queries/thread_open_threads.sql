-- Threads with runs left open (collecting, queued, accepted or running)
-- when their node went down: the directory wakes them at start so they
-- resume.
SELECT DISTINCT thread_id FROM thread_runs
WHERE state IN ('collecting', 'queued', 'accepted', 'running')
LIMIT 100000
