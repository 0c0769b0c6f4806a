-- Operator replay (§15.6): an errored request goes back to 'accepted' with
-- the same request_id; its failed and skipped subrequests start a new
-- round of attempts, the succeeded ones are kept; its dead letters are
-- marked replayed. Idempotent: anything but an errored request is refused
-- (and the refusal audited too), as is one whose text the retention has
-- redacted (runtime/retention.md): there is nothing left to run.
-- $1 request_id, $2 who, $3 why.
-- Returns received_at (Unix µs) and how many subrequests run again, when
-- replayed; no row when refused.
WITH target AS (
  SELECT request_id, received_at FROM message_inbox
  WHERE request_id = $1::uuid AND lifecycle_state = 'errored'
    AND raw_payload <> ''
  FOR UPDATE
), upd AS (
  UPDATE message_inbox m
  SET lifecycle_state = 'accepted', error_class = NULL, error_message = NULL,
      lease_owner = NULL, lease_expires_at = NULL, completed_at = NULL,
      updated_at = now()
  FROM target t
  WHERE m.request_id = t.request_id AND m.received_at = t.received_at
  RETURNING m.request_id, m.received_at
), seg AS (
  UPDATE fanout_execution_log
  SET state = 'pending', round_attempts = 0, updated_at = now()
  WHERE request_id = $1::uuid AND state IN ('error', 'skipped', 'dispatched',
                                            'pending')
    AND EXISTS (SELECT 1 FROM upd)
  RETURNING segment_id
), dl AS (
  UPDATE dead_letters
  SET replayed_at = now(), replay_count = replay_count + 1
  WHERE request_id = $1::uuid AND EXISTS (SELECT 1 FROM upd)
), tr AS (
  INSERT INTO inbox_transitions (request_id, from_state, to_state,
                                 lease_owner)
  SELECT request_id, 'errored', 'accepted', 'operator:' || $2 FROM upd
), audit AS (
  INSERT INTO operator_audit (who, action, request_id, why, result)
  VALUES ($2, 'replay', $1::uuid, $3,
          CASE WHEN EXISTS (SELECT 1 FROM target) THEN 'replayed'
               ELSE 'refused: the request is not errored' END)
)
SELECT (extract(epoch FROM received_at) * 1000000)::bigint,
       (SELECT count(*) FROM seg)
FROM upd
