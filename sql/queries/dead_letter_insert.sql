-- A subrequest that failed past its retries (§15.6). Replays reset
-- replayed_at; a later failure records again.
-- $1 request_id, $2 segment_id, $3 butler, $4 error_class,
-- $5 error_message, $6 attempts.
INSERT INTO dead_letters (request_id, segment_id, butler, error_class,
                          error_message, attempts)
VALUES ($1::uuid, $2, $3, $4, NULLIF($5, ''), $6::integer)
ON CONFLICT (request_id, segment_id) DO UPDATE
SET error_class = EXCLUDED.error_class,
    error_message = EXCLUDED.error_message,
    attempts = EXCLUDED.attempts,
    created_at = now(),
    replayed_at = NULL
RETURNING 1
