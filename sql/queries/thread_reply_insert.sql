-- A run ended: its answer (or error) joins the transcript and the run takes
-- its terminal state. $1 thread_id, $2 run_id, $3 butler, $4 kind (reply |
-- error | cancelled), $5 body, $6 detail (JSON text, '' = none), $7 state
-- (ok | error | cancelled), $8 error_class ('' = none). The answer is the
-- thread's last message (threads.last_message_at).
-- Returns (cursor, at_ms, first): the cursor and time (Unix ms) of the
-- stored message (no row when already stored) and the start of the
-- thread's first user message (its title, as thread_turn_insert).
WITH run AS (
  UPDATE thread_runs
  SET state = $7, error_class = NULLIF($8, ''),
      error_message = CASE WHEN $7 = 'ok' THEN NULL ELSE $5 END,
      updated_at = now()
  WHERE run_id = $2::uuid
), ins AS (
  INSERT INTO thread_transcript (thread_id, message_id, role, kind, run_id,
                                 butler, body, detail)
  SELECT $1, 'run:' || $2, 'assistant', $4, $2::uuid, $3, $5,
         NULLIF($6, '')::json
  -- A run whose thread was forgotten meanwhile (runtime/forget.md) stores
  -- no answer.
  WHERE EXISTS (SELECT 1 FROM threads WHERE thread_id = $1)
  ON CONFLICT (thread_id, message_id) DO NOTHING
  RETURNING cursor, created_at
), touch AS (
  UPDATE threads SET last_message_at = now()
  WHERE thread_id = $1 AND EXISTS (SELECT 1 FROM ins)
)
SELECT ins.cursor, (extract(epoch FROM ins.created_at) * 1000)::bigint,
       (SELECT left(body, 512) FROM thread_transcript
        WHERE thread_id = $1 AND role = 'user' ORDER BY cursor LIMIT 1)
FROM ins
