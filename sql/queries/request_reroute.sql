-- Operator reroute (§15.12): an unfinished or failed subrequest of a
-- request that is not 'parsed' gets another butler; an errored request is
-- then replayed (same request_id) so the new target runs. Audited.
-- $1 request_id, $2 who, $3 why, $4 segment_id, $5 butler.
-- Returns the request's lifecycle state when rerouted; no row when refused.
WITH seg AS (
  UPDATE fanout_execution_log l
  SET butler = $5, state = 'pending', round_attempts = 0, updated_at = now()
  FROM message_inbox m
  WHERE l.request_id = $1::uuid AND l.segment_id = $4
    AND l.state IN ('pending', 'error', 'skipped')
    AND m.request_id = l.request_id AND m.lifecycle_state <> 'parsed'
    AND m.lifecycle_state <> 'cancelled'
  RETURNING m.lifecycle_state
), audit AS (
  INSERT INTO operator_audit (who, action, request_id, segment_id, why,
                              result, details)
  VALUES ($2, 'reroute', $1::uuid, $4, $3,
          CASE WHEN EXISTS (SELECT 1 FROM seg) THEN 'rerouted to ' || $5
               ELSE 'refused: no such open or failed segment' END,
          jsonb_build_object('butler', $5))
)
SELECT lifecycle_state FROM seg
