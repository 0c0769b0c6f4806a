-- The hourly rollup of the hour containing $1 (a timestamptz), recomputed
-- whole from the heartbeat log's deltas and states: idempotent. Returns the
-- bucket and the number of connectors in it.
WITH bucket AS (
  SELECT date_trunc('hour', $1::timestamptz AT TIME ZONE 'UTC')
           AT TIME ZONE 'UTC' AS lo
), up AS (
  INSERT INTO connector_stats_hourly AS h (
    connector_type, endpoint_identity, hour, messages_ingested,
    messages_failed, source_api_calls, dedupe_accepted, heartbeat_count,
    healthy_count, degraded_count, error_count)
  SELECT l.connector_type, l.endpoint_identity, b.lo,
         sum(l.delta_messages_ingested), sum(l.delta_messages_failed),
         sum(l.delta_source_api_calls), sum(l.delta_dedupe_accepted),
         count(*), count(*) FILTER (WHERE l.state = 'healthy'),
         count(*) FILTER (WHERE l.state = 'degraded'),
         count(*) FILTER (WHERE l.state = 'error')
  FROM connector_heartbeat_log l, bucket b
  WHERE l.received_at >= b.lo AND l.received_at < b.lo + interval '1 hour'
  GROUP BY l.connector_type, l.endpoint_identity, b.lo
  ON CONFLICT (connector_type, endpoint_identity, hour) DO UPDATE
  SET messages_ingested = EXCLUDED.messages_ingested,
      messages_failed = EXCLUDED.messages_failed,
      source_api_calls = EXCLUDED.source_api_calls,
      dedupe_accepted = EXCLUDED.dedupe_accepted,
      heartbeat_count = EXCLUDED.heartbeat_count,
      healthy_count = EXCLUDED.healthy_count,
      degraded_count = EXCLUDED.degraded_count,
      error_count = EXCLUDED.error_count
  RETURNING 1
)
SELECT to_char(b.lo AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"'),
       (SELECT count(*) FROM up)
FROM bucket b
