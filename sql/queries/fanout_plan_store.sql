-- Stores requests' plans and their segments, or — for a request planned
-- before (processed again after a crash, a lost lease or a replay) — keeps
-- the stored plan and returns its segments as they stand. The inbox row is
-- not touched (one row version less per request): request inspection
-- reads the plan from fanout_plans; rows planned by older versions also
-- carry it in message_inbox.decomposition. A plan is stored only for a
-- request in 'progress': the switchboard sends a new request's plan with
-- its claim, and a claim that failed must leave nothing behind.
-- Set-based: parameter i is the array of every statement's i-th value (see
-- inbox_store.cpp, `set_based`); a request appears once per batch.
-- $1 request_id, $2 received_at (Unix µs), $3 router, $4 fallback
-- ('true'/'false'), $5 fallback_reason ('' = none), $6 confidence,
-- $7 fanout_mode, $8 join_policy, $9 abort_policy, $10 policy_tier,
-- $11 plan (router_plan.v1 + routing metadata, JSON), $12 segments (JSON
-- array of {segment_id, ordinal, butler, prompt, dispatched}).
-- A new plan's segments whose `dispatched` is true (those the fanout sends
-- at once) are stored as dispatched, attempt 1: the switchboard writes no
-- segment update for that first dispatch. If it stops before sending one,
-- whoever processes the request again redelivers that attempt, as for any
-- dispatch that was out (the butler dedupes it).
-- Returns, by statement and then segment ordinal: the statement's ordinal
-- (1-based), fanout_mode, segment_id, ordinal, butler, prompt, state,
-- attempts, round_attempts, work_id, error_class, error_message, and
-- whether the first dispatch is stored already ('true' / 'false'). A new
-- plan's segments come back as they stand before any dispatch ('pending',
-- 0 attempts), so that the switchboard dispatches them as usual.
-- Every table is reached through its key (`= ANY` of the batch's requests,
-- or equality), so a generic plan (the statement is prepared) looks rows up
-- by index at any size.
WITH t AS (
  SELECT t.request_id::uuid AS request_id, t.us::bigint AS us, t.router,
         t.fallback::boolean AS fallback, t.fallback_reason,
         t.confidence::double precision AS confidence, t.fanout_mode,
         t.join_policy, t.abort_policy, t.policy_tier, t.plan::jsonb AS plan,
         t.segments::jsonb AS segments, t.ord
  FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[],
              $6::text[], $7::text[], $8::text[], $9::text[], $10::text[],
              $11::text[], $12::text[]) WITH ORDINALITY
    AS t(request_id, us, router, fallback, fallback_reason, confidence,
         fanout_mode, join_policy, abort_policy, policy_tier, plan, segments,
         ord)
), open AS (
  SELECT t.* FROM t
  WHERE EXISTS (
    -- The state test is a CASE so that the open-rows partial index (which
    -- grows with the backlog) stays out of the plan (see inbox_claim.sql).
    SELECT 1 FROM message_inbox m
    WHERE m.request_id = ANY(($1::text[])::uuid[])
      AND m.request_id = t.request_id
      AND m.received_at = timestamptz 'epoch' + t.us * interval '1 microsecond'
      AND CASE m.lifecycle_state WHEN 'progress' THEN true ELSE false END)
), plan_ins AS (
  INSERT INTO fanout_plans (request_id, router, fallback, fallback_reason,
                            confidence, fanout_mode, join_policy,
                            abort_policy, policy_tier, plan)
  SELECT request_id, router, fallback, NULLIF(fallback_reason, ''),
         confidence, fanout_mode, join_policy, abort_policy, policy_tier, plan
  FROM open
  ON CONFLICT (request_id) DO NOTHING
  RETURNING request_id
), seg_ins AS (
  INSERT INTO fanout_execution_log (request_id, segment_id, ordinal, butler,
                                    prompt, state, attempts, round_attempts)
  SELECT t.request_id, s.segment_id, s.ordinal, s.butler, s.prompt,
         CASE WHEN s.dispatched THEN 'dispatched' ELSE 'pending' END,
         CASE WHEN s.dispatched THEN 1 ELSE 0 END,
         CASE WHEN s.dispatched THEN 1 ELSE 0 END
  FROM t JOIN plan_ins USING (request_id),
       jsonb_to_recordset(t.segments)
         AS s(segment_id text, ordinal integer, butler text, prompt text,
              dispatched boolean)
  RETURNING request_id, segment_id, ordinal, butler, prompt, state
)
SELECT t.ord, t.fanout_mode, s.segment_id, s.ordinal, s.butler, s.prompt,
       'pending', 0, 0, '', '', '', (s.state = 'dispatched')::text
FROM seg_ins s JOIN t USING (request_id)
UNION ALL
SELECT t.ord, p.fanout_mode, l.segment_id, l.ordinal, l.butler, l.prompt,
       l.state, l.attempts, l.round_attempts, coalesce(l.work_id, ''),
       coalesce(l.error_class, ''), coalesce(l.error_message, ''), 'false'
FROM t JOIN fanout_plans p USING (request_id)
       JOIN fanout_execution_log l USING (request_id)
WHERE p.request_id = ANY(($1::text[])::uuid[])
  AND l.request_id = ANY(($1::text[])::uuid[])
  AND NOT EXISTS (SELECT 1 FROM plan_ins i WHERE i.request_id = t.request_id)
ORDER BY 1, 4
