-- The fanout rollup of the UTC day containing $1 (a timestamptz): requests
-- received that day from each connector (the inbox row's source channel
-- and endpoint identity) that were dispatched to each butler (their
-- subrequests in fanout_execution_log). Recomputed whole: idempotent.
-- Returns the day and the number of (connector, butler) pairs.
WITH bucket AS (
  SELECT ($1::timestamptz AT TIME ZONE 'UTC')::date AS day
), up AS (
  INSERT INTO connector_fanout_daily AS f (
    connector_type, endpoint_identity, target_butler, day, message_count)
  SELECT m.source_channel, m.source_endpoint_identity, x.butler, b.day,
         count(DISTINCT m.request_id)
  FROM bucket b
  JOIN message_inbox m
    ON m.received_at >= b.day::timestamp AT TIME ZONE 'UTC'
   AND m.received_at < (b.day + 1)::timestamp AT TIME ZONE 'UTC'
  JOIN fanout_execution_log x ON x.request_id = m.request_id
  WHERE x.state IN ('dispatched', 'ok', 'error')
  GROUP BY m.source_channel, m.source_endpoint_identity, x.butler, b.day
  ON CONFLICT (connector_type, endpoint_identity, target_butler, day)
  DO UPDATE SET message_count = EXCLUDED.message_count
  RETURNING 1
)
SELECT to_char(b.day, 'YYYY-MM-DD'), (SELECT count(*) FROM up)
FROM bucket b
