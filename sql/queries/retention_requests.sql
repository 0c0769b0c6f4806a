-- Retention, content (runtime/retention.md): the text of requests finished
-- ('parsed', 'errored', 'cancelled') more than $1 days ago, at most $2
-- requests per run, oldest first. A request is 'parsed' only once what it
-- owes has been delivered, so nothing here is still needed. Rows stay
-- (accounting, audit, dedupe) with their text emptied: the inbox's
-- raw_payload and normalized_text become '' and its decomposition,
-- outcomes, summary and error message NULL; the plan becomes '{}', each
-- segment's prompt '' (its raw response and error NULL); error messages of
-- dead letters and of the routing log NULL; a tool call's arguments their
-- key names; the outbound ledger's value '' and error NULL. Rows locked by
-- someone else are skipped until the next run.
-- Returns (relation, action, rows).
WITH done AS (
  SELECT request_id, received_at FROM message_inbox
  WHERE lifecycle_state IN ('parsed', 'errored', 'cancelled')
    AND raw_payload <> ''
    AND completed_at < now() - make_interval(days => $1::int)
  ORDER BY completed_at
  LIMIT $2::int
  FOR UPDATE SKIP LOCKED
), ids AS (
  -- As an array, so each table is reached through its key's index.
  SELECT array_agg(request_id) AS a FROM done
), plans AS (
  UPDATE fanout_plans p SET plan = '{}'::jsonb
  WHERE p.request_id = ANY ((SELECT a FROM ids)::uuid[])
    AND p.plan <> '{}'::jsonb
  RETURNING 1
), segments AS (
  UPDATE fanout_execution_log x
  SET prompt = '', raw_response = NULL, error_message = NULL
  WHERE x.request_id = ANY ((SELECT a FROM ids)::uuid[])
    AND (x.prompt <> '' OR x.raw_response IS NOT NULL
         OR x.error_message IS NOT NULL)
  RETURNING 1
), dead AS (
  UPDATE dead_letters l SET error_message = NULL
  WHERE l.request_id = ANY ((SELECT a FROM ids)::uuid[])
    AND l.error_message IS NOT NULL
  RETURNING 1
), routes AS (
  UPDATE routing_log r SET error_message = NULL
  WHERE r.request_id = ANY ((SELECT a FROM ids)::uuid[])
    AND r.error_message IS NOT NULL
  RETURNING 1
), tools AS (
  UPDATE tool_calls t
  SET arguments = jsonb_build_object(
        'redacted', true,
        'keys', coalesce((SELECT jsonb_agg(k)
                          FROM jsonb_object_keys(t.arguments) k), '[]'))
  WHERE t.request_id = ANY ((SELECT a FROM ids)::uuid[])
    AND jsonb_typeof(t.arguments) = 'object'
    AND t.arguments->'redacted' IS DISTINCT FROM 'true'::jsonb
  RETURNING 1
), ledger AS (
  UPDATE outbound_ledger o SET value = '', error_message = NULL
  WHERE o.request_id = ANY ((SELECT a FROM ids)::uuid[])
    AND o.state IN ('sent', 'skipped', 'dead')
    AND (o.value <> '' OR o.error_message IS NOT NULL)
  RETURNING 1
), inbox AS (
  UPDATE message_inbox m
  SET raw_payload = '', normalized_text = '', decomposition = NULL,
      dispatch_outcomes = NULL, response_summary = NULL, error_message = NULL
  FROM done d
  WHERE m.request_id = d.request_id AND m.received_at = d.received_at
  RETURNING 1
)
SELECT 'message_inbox', 'redact', (SELECT count(*) FROM inbox)
UNION ALL SELECT 'fanout_plans', 'redact', (SELECT count(*) FROM plans)
UNION ALL SELECT 'fanout_execution_log', 'redact',
                 (SELECT count(*) FROM segments)
UNION ALL SELECT 'dead_letters', 'redact', (SELECT count(*) FROM dead)
UNION ALL SELECT 'routing_log', 'redact', (SELECT count(*) FROM routes)
UNION ALL SELECT 'tool_calls', 'redact', (SELECT count(*) FROM tools)
UNION ALL SELECT 'outbound_ledger', 'redact', (SELECT count(*) FROM ledger)
