-- Claims due reminders of the butlers $1 (text[]) for $2 seconds: pending
-- ones past due, and firing ones whose claimant's lease ran out (it died
-- before marking them fired). At most $3; rows another node is claiming
-- are skipped. Returns reminder_id, butler, payload, channel, endpoint,
-- sender, thread, origin request.
WITH due AS (
  SELECT reminder_id FROM butler_reminders
  WHERE butler = ANY($1::text[]) AND due_at <= now()
    AND (state = 'pending' OR (state = 'firing' AND lease_until < now()))
  ORDER BY due_at
  LIMIT $3::integer
  FOR UPDATE SKIP LOCKED
)
UPDATE butler_reminders b
SET state = 'firing', lease_until = now() + make_interval(secs => $2::int)
FROM due
WHERE b.reminder_id = due.reminder_id
RETURNING b.reminder_id::text, b.butler, b.payload, b.source_channel,
          b.source_endpoint, b.source_sender, b.source_thread,
          b.origin_request::text
