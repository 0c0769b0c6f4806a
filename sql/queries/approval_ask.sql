-- Stores a session's approval request, or finds the one its work item
-- asked before (a retried run asks again). $1 approval_id, $2 run_id, $3
-- work_id, $4 butler, $5 tool, $6 summary, $7 ask_key, $8 channel, $9
-- endpoint, $10 sender, $11 thread, $12 timeout in seconds. Returns
-- approval_id, status, expires_at (Unix ms), answered_by, notice_ref and
-- whether the row is new ('t'/'f').
WITH ins AS (
  INSERT INTO approvals (approval_id, run_id, work_id, butler, tool, summary,
                         ask_key, requester_channel, requester_endpoint,
                         requester_sender, requester_thread, expires_at)
  VALUES ($1::uuid, $2::text, $3::text, $4::text, $5::text, $6::text,
          $7::text, $8::text, $9::text, $10::text, $11::text,
          now() + make_interval(secs => $12::int))
  ON CONFLICT (work_id, ask_key) DO NOTHING
  RETURNING approval_id, status, expires_at, answered_by, notice_ref
)
SELECT approval_id::text, status,
       (extract(epoch FROM expires_at) * 1000)::bigint,
       coalesce(answered_by, ''), notice_ref, 't'
FROM ins
UNION ALL
SELECT approval_id::text, status,
       (extract(epoch FROM expires_at) * 1000)::bigint,
       coalesce(answered_by, ''), notice_ref, 'f'
FROM approvals
WHERE work_id = $3::text AND ask_key = $7::text
  AND NOT EXISTS (SELECT 1 FROM ins)
