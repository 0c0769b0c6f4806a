-- Operator force-complete (§15.12): a request that is not 'parsed' ends in
-- $4 ('parsed' or 'errored') with the operator's annotation. Audited.
-- $1 request_id, $2 who, $3 why, $4 state. Returns received_at (Unix µs)
-- when applied; no row when refused.
WITH target AS (
  SELECT request_id, received_at, lifecycle_state FROM message_inbox
  WHERE request_id = $1::uuid AND lifecycle_state <> 'parsed'
    AND $4 IN ('parsed', 'errored')
  FOR UPDATE
), upd AS (
  UPDATE message_inbox m
  SET lifecycle_state = $4,
      error_class = CASE WHEN $4 = 'errored'
                         THEN coalesce(m.error_class, 'internal_error') END,
      error_message = 'force-completed by ' || $2 || ': ' || $3,
      lease_owner = NULL, lease_expires_at = NULL, completed_at = now(),
      updated_at = now()
  FROM target t
  WHERE m.request_id = t.request_id AND m.received_at = t.received_at
  RETURNING m.request_id, m.received_at, t.lifecycle_state AS from_state
), tr AS (
  INSERT INTO inbox_transitions (request_id, from_state, to_state,
                                 lease_owner)
  SELECT request_id, from_state, $4, 'operator:' || $2 FROM upd
), audit AS (
  INSERT INTO operator_audit (who, action, request_id, why, result)
  VALUES ($2, 'force_complete', $1::uuid, $3,
          CASE WHEN EXISTS (SELECT 1 FROM target) THEN 'completed as ' || $4
               ELSE 'refused: already parsed, unknown, or bad state' END)
)
SELECT (extract(epoch FROM received_at) * 1000000)::bigint FROM upd
