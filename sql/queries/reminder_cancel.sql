-- Cancels a pending reminder of butler $2 set for sender $4 on channel $3
-- (tool remind_cancel). $1 reminder_id. Returns the state it had before,
-- or no row when there is no such reminder for this butler and sender.
WITH r AS (
  SELECT reminder_id, state FROM butler_reminders
  WHERE reminder_id = $1::uuid AND butler = $2::text AND source_channel = $3::text
    AND source_sender = $4::text
  FOR UPDATE
), upd AS (
  UPDATE butler_reminders b SET state = 'cancelled'
  FROM r WHERE b.reminder_id = r.reminder_id AND r.state = 'pending'
  RETURNING b.reminder_id
)
SELECT r.state, (SELECT count(*) FROM upd) FROM r
