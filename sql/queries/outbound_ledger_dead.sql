-- An outbound send that failed for good: its key 'dead' with the class,
-- and its delivery (request, segment) in dead_letters as the messenger's
-- (§15.6), with the attempts the ledger counted.
-- $1 request_id, $2 segment_id, $3 part, $4 error_class, $5 error_message.
WITH up AS (
  UPDATE outbound_ledger
  SET state = 'dead', error_class = $4::text,
      error_message = NULLIF($5::text, ''), updated_at = now()
  WHERE request_id = $1::uuid AND segment_id = $2::text AND part = $3::text
  RETURNING attempts
)
INSERT INTO dead_letters (request_id, segment_id, butler, error_class,
                          error_message, attempts)
VALUES ($1::uuid, $2::text, 'messenger', $4::text, NULLIF($5::text, ''),
        coalesce((SELECT attempts FROM up), 1))
ON CONFLICT (request_id, segment_id) DO UPDATE
SET error_class = EXCLUDED.error_class,
    error_message = EXCLUDED.error_message,
    attempts = EXCLUDED.attempts,
    created_at = now(),
    replayed_at = NULL
RETURNING 1
