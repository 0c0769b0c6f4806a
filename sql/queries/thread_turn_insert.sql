-- A user turn, stored before it is applied (spec 003 §8.1). $1 thread_id,
-- $2 message_id, $3 text, $4 run_id (the new run for start and queued, the
-- active run for steer, the collecting run for collect), $5 kind (start |
-- steer | queued | collect), $6 butler. start and queued also create the
-- run (state accepted | queued); collect creates it (state collecting) with
-- the first turn of its window and joins it with the others.
-- Returns (fresh, cursor, run_id, kind): fresh false when the message_id
-- was already stored, with the original's run and kind; nothing else is
-- written then.
WITH t AS (
  INSERT INTO threads (thread_id) VALUES ($1)
  ON CONFLICT (thread_id) DO UPDATE SET updated_at = now()
  RETURNING thread_id
), ins AS (
  INSERT INTO thread_transcript (thread_id, message_id, role, kind, run_id,
                                 butler, body)
  SELECT t.thread_id, $2, 'user', $5, $4::uuid, $6, $3 FROM t
  ON CONFLICT (thread_id, message_id) DO NOTHING
  RETURNING cursor, run_id, kind
), run AS (
  INSERT INTO thread_runs (run_id, thread_id, butler, state)
  SELECT $4::uuid, $1, $6,
         CASE $5 WHEN 'queued' THEN 'queued'
                 WHEN 'collect' THEN 'collecting'
                 ELSE 'accepted' END
  FROM ins WHERE $5 <> 'steer'
  ON CONFLICT (run_id) DO NOTHING
)
SELECT true, cursor, run_id::text, kind FROM ins
UNION ALL
SELECT false, cursor, run_id::text, kind FROM thread_transcript
WHERE thread_id = $1 AND message_id = $2 AND NOT EXISTS (SELECT 1 FROM ins)
