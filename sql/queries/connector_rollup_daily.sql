-- The daily rollup of the UTC day containing $1 (a timestamptz): sums of
-- that day's hourly rows, and the uptime percentage from heartbeat coverage
-- (connector_uptime_pct). Recomputed whole: idempotent. Returns the day and
-- the number of connectors in it.
WITH bucket AS (
  SELECT ($1::timestamptz AT TIME ZONE 'UTC')::date AS day
), up AS (
  INSERT INTO connector_stats_daily AS d (
    connector_type, endpoint_identity, day, messages_ingested,
    messages_failed, source_api_calls, dedupe_accepted, heartbeat_count,
    healthy_count, degraded_count, error_count, uptime_pct)
  SELECT h.connector_type, h.endpoint_identity, b.day,
         sum(h.messages_ingested), sum(h.messages_failed),
         sum(h.source_api_calls), sum(h.dedupe_accepted),
         sum(h.heartbeat_count), sum(h.healthy_count),
         sum(h.degraded_count), sum(h.error_count),
         connector_uptime_pct(h.connector_type, h.endpoint_identity,
                              b.day::timestamp AT TIME ZONE 'UTC',
                              (b.day + 1)::timestamp AT TIME ZONE 'UTC')
  FROM connector_stats_hourly h, bucket b
  WHERE h.hour >= b.day::timestamp AT TIME ZONE 'UTC'
    AND h.hour < (b.day + 1)::timestamp AT TIME ZONE 'UTC'
  GROUP BY h.connector_type, h.endpoint_identity, b.day
  ON CONFLICT (connector_type, endpoint_identity, day) DO UPDATE
  SET messages_ingested = EXCLUDED.messages_ingested,
      messages_failed = EXCLUDED.messages_failed,
      source_api_calls = EXCLUDED.source_api_calls,
      dedupe_accepted = EXCLUDED.dedupe_accepted,
      heartbeat_count = EXCLUDED.heartbeat_count,
      healthy_count = EXCLUDED.healthy_count,
      degraded_count = EXCLUDED.degraded_count,
      error_count = EXCLUDED.error_count,
      uptime_pct = EXCLUDED.uptime_pct
  RETURNING 1
)
SELECT to_char(b.day, 'YYYY-MM-DD'), (SELECT count(*) FROM up)
FROM bucket b
