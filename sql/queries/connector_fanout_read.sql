-- GET /api/connectors/fanout?period=: the connector → butler matrix of the
-- last 7 or 30 UTC days (connector_fanout_daily) as a JSON array of
-- {connector_type, endpoint_identity, targets: {butler: count}}.
-- $1 period (7d or 30d).
WITH sums AS (
  SELECT connector_type, endpoint_identity, target_butler,
         sum(message_count) AS n
  FROM connector_fanout_daily
  WHERE day > (now() AT TIME ZONE 'UTC')::date
              - (CASE $1 WHEN '7d' THEN 7 ELSE 30 END)
  GROUP BY connector_type, endpoint_identity, target_butler
), rows AS (
  SELECT connector_type, endpoint_identity,
         json_object_agg(target_butler, n ORDER BY target_butler) AS targets
  FROM sums
  GROUP BY connector_type, endpoint_identity
)
SELECT coalesce(json_agg(json_build_object(
         'connector_type', connector_type,
         'endpoint_identity', endpoint_identity,
         'targets', targets) ORDER BY connector_type, endpoint_identity),
       '[]'::json)::text
FROM rows
