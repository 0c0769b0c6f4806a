-- Stores a reminder (tool remind); a session retried after a crash sets the
-- same id again, which finds the first. $1 reminder_id, $2 butler, $3 due
-- (Unix ms), $4 payload, $5 channel, $6 endpoint, $7 sender, $8 thread, $9
-- origin request, $10 origin work item. Returns the id, the due time (RFC
-- 3339) and the state.
WITH ins AS (
  INSERT INTO butler_reminders (reminder_id, butler, due_at, payload,
                                source_channel, source_endpoint,
                                source_sender, source_thread, origin_request,
                                origin_work)
  SELECT $1::uuid, $2::text, to_timestamp($3::bigint / 1000.0), $4::text,
         $5::text, $6::text, $7::text, $8::text, $9::uuid, $10::uuid
  -- A run of a forgotten request (runtime/forget.md) sets no reminder:
  -- nothing may reach the person later. No row: the tool fails.
  WHERE NOT EXISTS (SELECT 1 FROM forget_tombstones
                    WHERE request_id = $9::uuid)
  ON CONFLICT (reminder_id) DO NOTHING
  RETURNING reminder_id, due_at, state
)
SELECT reminder_id::text,
       to_char(due_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'),
       state
FROM ins
UNION ALL
SELECT reminder_id::text,
       to_char(due_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'),
       state
FROM butler_reminders
WHERE reminder_id = $1::uuid AND NOT EXISTS (SELECT 1 FROM ins)
