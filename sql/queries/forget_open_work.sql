-- forget (runtime/forget.md): how many of the work items $1 (uuid[]) are
-- still open (queued or running): runs in flight when the forget began.
SELECT count(*) FROM route_work
WHERE work_id = ANY($1::uuid[]) AND state IN ('queued', 'running')
