-- The cold path's sweep: 'accepted' rows older than the grace period ($1 s)
-- and 'progress' rows whose lease expired, oldest first, at most $2, after
-- the cursor $3 (Unix µs; 0 from the start) so that a backlog is paged
-- through instead of re-reading the rows already handed out.
-- Two branches, each an ordered scan of the open-rows partial index that
-- stops after $2 rows; one WHERE with an OR made the planner read and sort
-- every open row instead (94 ms per sweep with a 100k backlog).
SELECT request_id::text,
       (extract(epoch FROM received_at) * 1000000)::bigint
FROM (
  (SELECT request_id, received_at
   FROM message_inbox
   WHERE lifecycle_state = 'accepted'
     AND received_at < now() - make_interval(secs => $1)
     AND received_at > timestamptz 'epoch' + $3 * interval '1 microsecond'
   ORDER BY received_at
   LIMIT $2)
  UNION ALL
  (SELECT request_id, received_at
   FROM message_inbox
   WHERE lifecycle_state = 'progress'
     AND lease_expires_at < now()
     AND received_at > timestamptz 'epoch' + $3 * interval '1 microsecond'
   ORDER BY received_at
   LIMIT $2)
) open_rows
ORDER BY received_at
LIMIT $2
