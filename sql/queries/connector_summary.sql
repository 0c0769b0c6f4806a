-- GET /api/connectors/summary?period=: per connector (seconds since its
-- last heartbeat, type, identity, messages ingested, messages failed) over
-- the period: the last 24 hourly buckets (24h) or the last 7 or 30 UTC
-- days of daily buckets (7d, 30d). The node adds liveness and totals.
-- $1 period (24h, 7d or 30d).
SELECT extract(epoch FROM now() - r.last_heartbeat_at)::double precision,
       r.connector_type, r.endpoint_identity,
       coalesce(v.mi, 0), coalesce(v.mf, 0)
FROM connector_registry r
LEFT JOIN LATERAL (
  SELECT sum(h.messages_ingested) AS mi, sum(h.messages_failed) AS mf
  FROM connector_stats_hourly h
  WHERE $1 = '24h' AND h.connector_type = r.connector_type
    AND h.endpoint_identity = r.endpoint_identity
    AND h.hour >= date_trunc('hour', now()) - interval '23 hours'
  UNION ALL
  SELECT sum(d.messages_ingested), sum(d.messages_failed)
  FROM connector_stats_daily d
  WHERE $1 <> '24h' AND d.connector_type = r.connector_type
    AND d.endpoint_identity = r.endpoint_identity
    AND d.day > (now() AT TIME ZONE 'UTC')::date
                - (CASE $1 WHEN '7d' THEN 7 ELSE 30 END)
) v ON v.mi IS NOT NULL OR v.mf IS NOT NULL
ORDER BY r.connector_type, r.endpoint_identity
