-- The cold path's sweep: 'accepted' rows older than the grace period ($1 s)
-- and 'progress' rows whose lease expired, oldest first, at most $2, from
-- the cursor $3 on (Unix µs; 0 from the start) so that a backlog is paged
-- through instead of re-reading the rows already handed out. The cursor is
-- the last page's last receipt time, and it is included: rows received in
-- the same microsecond may straddle two pages (the few re-read are offered
-- again, and the switchboard skips what it holds). Each row comes with
-- what routing needs (context, text, tier), so the switchboard can send
-- its plan with its claim.
-- Two branches, each an ordered scan of the open-rows partial index that
-- stops after $2 rows; one WHERE with an OR made the planner read and sort
-- every open row instead (94 ms per sweep with a 100k backlog).
SELECT request_id::text,
       (extract(epoch FROM received_at) * 1000000)::bigint, source_channel,
       source_endpoint_identity, source_sender_identity,
       coalesce(source_thread_identity, ''), coalesce(trace_parent, ''),
       normalized_text, policy_tier, coalesce(trace_state, '')
FROM (
  (SELECT request_id, received_at, source_channel, source_endpoint_identity,
          source_sender_identity, source_thread_identity, trace_parent,
          normalized_text, policy_tier, trace_state
   FROM message_inbox
   WHERE lifecycle_state = 'accepted'
     AND received_at < now() - make_interval(secs => $1)
     AND received_at >= timestamptz 'epoch' + $3 * interval '1 microsecond'
   ORDER BY received_at
   LIMIT $2)
  UNION ALL
  (SELECT request_id, received_at, source_channel, source_endpoint_identity,
          source_sender_identity, source_thread_identity, trace_parent,
          normalized_text, policy_tier, trace_state
   FROM message_inbox
   WHERE lifecycle_state = 'progress'
     AND lease_expires_at < now()
     AND received_at >= timestamptz 'epoch' + $3 * interval '1 microsecond'
   ORDER BY received_at
   LIMIT $2)
) open_rows
ORDER BY received_at
LIMIT $2
