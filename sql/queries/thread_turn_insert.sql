-- A user turn, stored before it is applied (spec 003 §8.1). $1 thread_id,
-- $2 message_id, $3 text, $4 run_id (the new run for start and queued, the
-- active run for steer, the collecting run for collect), $5 kind (start |
-- steer | queued | collect), $6 butler, $7 sender, $8 model and $9
-- max_steps ('' and '0' for none: the run's options, stored with a run
-- this turn creates), $10 the turn's files (their references as JSON, ''
-- for none; stored with a run it starts or queues). start and queued also create the
-- run (state accepted | queued); collect creates it (state collecting) with
-- the first turn of its window and joins it with the others. A stored turn
-- is the thread's last message (threads.last_message_at).
-- Returns (fresh, cursor, run_id, kind, first, at_ms): fresh false when the
-- message_id was already stored, with the original's run and kind; nothing
-- else is written then. `first` is the start (at most 512 characters) of
-- the thread's first user message, which its title is made of; `at_ms` the
-- time of the stored message, Unix ms.
-- The thread's row is inserted (new thread) or updated (a fresh turn of a
-- known one) by two statements, so no row is modified twice; the foreign
-- keys are checked at the end of the statement, after both.
WITH t AS (
  INSERT INTO threads (thread_id) VALUES ($1)
  ON CONFLICT (thread_id) DO NOTHING
), ins AS (
  INSERT INTO thread_transcript (thread_id, message_id, role, kind, run_id,
                                 butler, body)
  VALUES ($1, $2, 'user', $5, $4::uuid, $6, $3)
  ON CONFLICT (thread_id, message_id) DO NOTHING
  RETURNING cursor, run_id, kind, created_at
), touch AS (
  UPDATE threads SET updated_at = now(), last_message_at = now()
  WHERE thread_id = $1 AND EXISTS (SELECT 1 FROM ins)
), run AS (
  INSERT INTO thread_runs (run_id, thread_id, butler, state, sender, model,
                           max_steps, attachments)
  SELECT $4::uuid, $1, $6,
         CASE $5 WHEN 'queued' THEN 'queued'
                 WHEN 'collect' THEN 'collecting'
                 ELSE 'accepted' END,
         NULLIF($7, ''), NULLIF($8, ''), NULLIF($9::integer, 0),
         CASE WHEN $5 IN ('start', 'queued') THEN NULLIF($10, '')::jsonb END
  FROM ins WHERE $5 <> 'steer'
  ON CONFLICT (run_id) DO NOTHING
), first AS (
  SELECT COALESCE((SELECT left(body, 512) FROM thread_transcript
                   WHERE thread_id = $1 AND role = 'user'
                   ORDER BY cursor LIMIT 1), left($3, 512)) AS body
)
SELECT true, cursor, run_id::text, kind, first.body,
       (extract(epoch FROM created_at) * 1000)::bigint
FROM ins, first
UNION ALL
SELECT false, x.cursor, x.run_id::text, x.kind, first.body,
       (extract(epoch FROM x.created_at) * 1000)::bigint
FROM thread_transcript x, first
WHERE x.thread_id = $1 AND x.message_id = $2 AND NOT EXISTS (SELECT 1 FROM ins)
