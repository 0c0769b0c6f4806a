-- A run ended: its answer (or error) joins the transcript and the run takes
-- its terminal state. $1 thread_id, $2 run_id, $3 butler, $4 kind (reply |
-- error | cancelled), $5 body, $6 detail (JSON text, '' = none), $7 state
-- (ok | error | cancelled), $8 error_class ('' = none).
-- Returns the cursor of the stored message (none when already stored).
WITH run AS (
  UPDATE thread_runs
  SET state = $7, error_class = NULLIF($8, ''),
      error_message = CASE WHEN $7 = 'ok' THEN NULL ELSE $5 END,
      updated_at = now()
  WHERE run_id = $2::uuid
)
INSERT INTO thread_transcript (thread_id, message_id, role, kind, run_id,
                               butler, body, detail)
VALUES ($1, 'run:' || $2, 'assistant', $4, $2::uuid, $3, $5,
        NULLIF($6, '')::json)
ON CONFLICT (thread_id, message_id) DO NOTHING
RETURNING cursor
