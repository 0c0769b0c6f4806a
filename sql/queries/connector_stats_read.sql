-- GET /api/connectors/{type}/{identity}/stats?period=: the connector's
-- time series and its summary as one JSON object; no row for an unknown
-- connector. 24h: hourly buckets (connector_stats_hourly) of the last 24
-- hours; 7d and 30d: daily buckets (connector_stats_daily) of the last 7 or
-- 30 UTC days, today included.
-- $1 connector_type, $2 endpoint_identity, $3 period (24h, 7d or 30d).
WITH r AS (
  SELECT * FROM connector_registry
  WHERE connector_type = $1 AND endpoint_identity = $2
), series AS (
  SELECT h.hour AS bucket, h.messages_ingested, h.messages_failed,
         h.healthy_count, h.degraded_count, h.error_count,
         NULL::real AS uptime_pct
  FROM connector_stats_hourly h
  WHERE $3 = '24h' AND h.connector_type = $1 AND h.endpoint_identity = $2
    AND h.hour >= date_trunc('hour', now()) - interval '23 hours'
  UNION ALL
  SELECT d.day::timestamp AT TIME ZONE 'UTC', d.messages_ingested,
         d.messages_failed, d.healthy_count, d.degraded_count,
         d.error_count, d.uptime_pct
  FROM connector_stats_daily d
  WHERE $3 <> '24h' AND d.connector_type = $1 AND d.endpoint_identity = $2
    AND d.day > (now() AT TIME ZONE 'UTC')::date
                - (CASE $3 WHEN '7d' THEN 7 ELSE 30 END)
), totals AS (
  SELECT coalesce(sum(messages_ingested), 0) AS mi,
         coalesce(sum(messages_failed), 0) AS mf,
         count(*) AS buckets,
         avg(uptime_pct) AS uptime
  FROM series
)
SELECT json_build_object(
  'connector_type', r.connector_type,
  'endpoint_identity', r.endpoint_identity,
  'period', $3,
  'granularity', CASE $3 WHEN '24h' THEN 'hour' ELSE 'day' END,
  'summary', json_build_object(
    'messages_ingested', t.mi,
    'messages_failed', t.mf,
    'error_rate_pct', CASE WHEN t.mi + t.mf = 0 THEN 0
                           ELSE round(100.0 * t.mf / (t.mi + t.mf), 2) END,
    'uptime_pct', CASE $3 WHEN '24h' THEN connector_uptime_pct(
                    r.connector_type, r.endpoint_identity,
                    date_trunc('hour', now()) - interval '23 hours',
                    date_trunc('hour', now()) + interval '1 hour')
                  ELSE t.uptime END,
    'avg_messages_per_hour', round(t.mi / CASE $3 WHEN '24h' THEN 24.0
                                              WHEN '7d' THEN 168.0
                                              ELSE 720.0 END, 2)),
  'timeseries', coalesce(
    (SELECT json_agg(json_build_object(
       'bucket', s.bucket,
       'messages_ingested', s.messages_ingested,
       'messages_failed', s.messages_failed,
       'healthy_count', s.healthy_count,
       'degraded_count', s.degraded_count,
       'error_count', s.error_count,
       'uptime_pct', s.uptime_pct) ORDER BY s.bucket)
     FROM series s), '[]'::json))::text
FROM r, totals t
