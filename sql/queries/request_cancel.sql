-- Operator cancel (§15.12): a request not yet terminal ends 'cancelled'.
-- $1 request_id, $2 who, $3 why. Returns received_at (Unix µs) when
-- cancelled; no row when refused (already terminal, or unknown).
WITH target AS (
  SELECT request_id, received_at, lifecycle_state FROM message_inbox
  WHERE request_id = $1::uuid
    AND lifecycle_state IN ('accepted', 'progress')
  FOR UPDATE
), upd AS (
  UPDATE message_inbox m
  SET lifecycle_state = 'cancelled', lease_owner = NULL,
      lease_expires_at = NULL, completed_at = now(), updated_at = now(),
      error_message = 'cancelled by ' || $2 || ': ' || $3
  FROM target t
  WHERE m.request_id = t.request_id AND m.received_at = t.received_at
  RETURNING m.request_id, m.received_at, t.lifecycle_state AS from_state
), tr AS (
  INSERT INTO inbox_transitions (request_id, from_state, to_state,
                                 lease_owner)
  SELECT request_id, from_state, 'cancelled', 'operator:' || $2 FROM upd
), audit AS (
  INSERT INTO operator_audit (who, action, request_id, why, result)
  VALUES ($2, 'cancel', $1::uuid, $3,
          CASE WHEN EXISTS (SELECT 1 FROM target) THEN 'cancelled'
               ELSE 'refused: the request is terminal or unknown' END)
)
SELECT (extract(epoch FROM received_at) * 1000000)::bigint FROM upd
