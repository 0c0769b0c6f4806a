-- Retention, audit (runtime/retention.md): rows older than $1 days, at most
-- $2 per table per run, are deleted: lifecycle transitions, routing
-- attempts, operator actions, tool calls, dead letters, answered or
-- expired approvals, ended thread runs, and the plans (with their
-- segments) of requests no longer open in the inbox.
-- Returns (relation, action, rows).
WITH transitions AS (
  DELETE FROM inbox_transitions WHERE ctid = ANY (ARRAY(
    SELECT ctid FROM inbox_transitions
    WHERE at < now() - make_interval(days => $1::int) LIMIT $2::int))
  RETURNING 1
), routes AS (
  DELETE FROM routing_log WHERE ctid = ANY (ARRAY(
    SELECT ctid FROM routing_log
    WHERE created_at < now() - make_interval(days => $1::int)
    LIMIT $2::int))
  RETURNING 1
), operator AS (
  DELETE FROM operator_audit WHERE ctid = ANY (ARRAY(
    SELECT ctid FROM operator_audit
    WHERE at < now() - make_interval(days => $1::int) LIMIT $2::int))
  RETURNING 1
), tools AS (
  DELETE FROM tool_calls WHERE ctid = ANY (ARRAY(
    SELECT ctid FROM tool_calls
    WHERE created_at < now() - make_interval(days => $1::int)
    LIMIT $2::int))
  RETURNING 1
), dead AS (
  DELETE FROM dead_letters WHERE ctid = ANY (ARRAY(
    SELECT ctid FROM dead_letters
    WHERE created_at < now() - make_interval(days => $1::int)
    LIMIT $2::int))
  RETURNING 1
), approvals AS (
  DELETE FROM approvals WHERE approval_id = ANY (ARRAY(
    SELECT approval_id FROM approvals
    WHERE status <> 'pending'
      AND created_at < now() - make_interval(days => $1::int)
    LIMIT $2::int
    FOR UPDATE SKIP LOCKED))
  RETURNING 1
), runs AS (
  DELETE FROM thread_runs WHERE run_id = ANY (ARRAY(
    SELECT run_id FROM thread_runs
    WHERE state IN ('ok', 'error', 'cancelled')
      AND updated_at < now() - make_interval(days => $1::int)
    LIMIT $2::int
    FOR UPDATE SKIP LOCKED))
  RETURNING 1
), plans AS (
  DELETE FROM fanout_plans WHERE request_id = ANY (ARRAY(
    SELECT p.request_id FROM fanout_plans p
    WHERE p.created_at < now() - make_interval(days => $1::int)
      AND NOT EXISTS (SELECT 1 FROM message_inbox m
                      WHERE m.request_id = p.request_id
                        AND m.lifecycle_state IN ('accepted', 'progress'))
    LIMIT $2::int
    FOR UPDATE SKIP LOCKED))
  RETURNING request_id
), segments AS (
  DELETE FROM fanout_execution_log
  WHERE request_id = ANY (ARRAY(SELECT request_id FROM plans))
  RETURNING 1
)
SELECT 'inbox_transitions', 'delete', (SELECT count(*) FROM transitions)
UNION ALL SELECT 'routing_log', 'delete', (SELECT count(*) FROM routes)
UNION ALL SELECT 'operator_audit', 'delete', (SELECT count(*) FROM operator)
UNION ALL SELECT 'tool_calls', 'delete', (SELECT count(*) FROM tools)
UNION ALL SELECT 'dead_letters', 'delete', (SELECT count(*) FROM dead)
UNION ALL SELECT 'approvals', 'delete', (SELECT count(*) FROM approvals)
UNION ALL SELECT 'thread_runs', 'delete', (SELECT count(*) FROM runs)
UNION ALL SELECT 'fanout_plans', 'delete', (SELECT count(*) FROM plans)
UNION ALL SELECT 'fanout_execution_log', 'delete',
                 (SELECT count(*) FROM segments)
