-- GET /api/connectors: one page of the registry, ordered by type and
-- identity. Rows: (seconds since the last heartbeat, the connector as a
-- JSON object without its liveness, total connectors); a page past the end
-- is one row of NULLs with the total. Liveness is added by the node from
-- the first column (runtime/connector_stats.hpp). "today" sums today's
-- hourly rollups (UTC).
-- $1 offset, $2 limit.
WITH today AS (
  SELECT date_trunc('day', now() AT TIME ZONE 'UTC') AT TIME ZONE 'UTC' AS lo
), page AS (
  SELECT r.connector_type, r.endpoint_identity,
         extract(epoch FROM now() - r.last_heartbeat_at)::double precision
           AS age,
         json_build_object(
           'connector_type', r.connector_type,
           'endpoint_identity', r.endpoint_identity,
           'state', r.state,
           'error_message', r.error_message,
           'version', r.version,
           'uptime_s', r.uptime_s,
           'last_heartbeat_at', r.last_heartbeat_at,
           'first_seen_at', r.first_seen_at,
           'today', json_build_object(
             'messages_ingested', coalesce(s.mi, 0),
             'messages_failed', coalesce(s.mf, 0),
             'uptime_pct', connector_uptime_pct(
               r.connector_type, r.endpoint_identity, t.lo,
               t.lo + interval '1 day')))::text AS obj
  FROM connector_registry r
  CROSS JOIN today t
  LEFT JOIN LATERAL (
    SELECT sum(h.messages_ingested) AS mi, sum(h.messages_failed) AS mf
    FROM connector_stats_hourly h
    WHERE h.connector_type = r.connector_type
      AND h.endpoint_identity = r.endpoint_identity AND h.hour >= t.lo
  ) s ON true
  ORDER BY r.connector_type, r.endpoint_identity
  OFFSET $1::bigint LIMIT $2::bigint
), total AS (
  SELECT count(*) AS n FROM connector_registry
)
SELECT p.age, p.obj, t.n
FROM total t LEFT JOIN page p ON true
ORDER BY p.connector_type, p.endpoint_identity
