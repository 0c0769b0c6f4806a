-- Stores a request's plan and its segments, or — when the request was
-- planned before (processed again after a crash, a lost lease or a replay)
-- keeps the stored plan and returns its segments as they stand. Also puts
-- the plan into message_inbox.decomposition.
-- $1 request_id, $2 received_at (Unix µs), $3 router, $4 fallback
-- ('true'/'false'), $5 fallback_reason ('' = none), $6 confidence,
-- $7 fanout_mode, $8 join_policy, $9 abort_policy, $10 policy_tier,
-- $11 plan (router_plan.v1 + routing metadata, JSON), $12 segments (JSON
-- array of {segment_id, ordinal, butler, prompt}).
-- Returns, ordered by ordinal: fanout_mode, segment_id, ordinal, butler,
-- prompt, state, attempts, round_attempts, work_id, error_class,
-- error_message.
WITH plan_ins AS (
  INSERT INTO fanout_plans (request_id, router, fallback, fallback_reason,
                            confidence, fanout_mode, join_policy,
                            abort_policy, policy_tier, plan)
  VALUES ($1::uuid, $3, $4::boolean, NULLIF($5, ''), $6::double precision,
          $7, $8, $9, $10, $11::jsonb)
  ON CONFLICT (request_id) DO NOTHING
  RETURNING request_id
), seg_ins AS (
  INSERT INTO fanout_execution_log (request_id, segment_id, ordinal, butler,
                                    prompt)
  SELECT $1::uuid, s.segment_id, s.ordinal, s.butler, s.prompt
  FROM jsonb_to_recordset($12::jsonb)
         AS s(segment_id text, ordinal integer, butler text, prompt text)
  WHERE EXISTS (SELECT 1 FROM plan_ins)
  RETURNING segment_id, ordinal, butler, prompt, state, attempts,
            round_attempts, work_id, error_class, error_message
), decomposed AS (
  UPDATE message_inbox
  SET decomposition = $11::jsonb, updated_at = now()
  WHERE request_id = $1::uuid
    AND received_at = timestamptz 'epoch' + $2::bigint * interval '1 microsecond'
    AND EXISTS (SELECT 1 FROM plan_ins)
)
SELECT $7::text, segment_id, ordinal, butler, prompt, state, attempts,
       round_attempts, coalesce(work_id, ''), coalesce(error_class, ''),
       coalesce(error_message, '')
FROM seg_ins
UNION ALL
SELECT p.fanout_mode, l.segment_id, l.ordinal, l.butler, l.prompt, l.state,
       l.attempts, l.round_attempts, coalesce(l.work_id, ''),
       coalesce(l.error_class, ''), coalesce(l.error_message, '')
FROM fanout_execution_log l JOIN fanout_plans p USING (request_id)
WHERE l.request_id = $1::uuid AND NOT EXISTS (SELECT 1 FROM plan_ins)
ORDER BY 3
