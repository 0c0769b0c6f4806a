-- GET /api/connectors/{type}/{identity}: (seconds since the last
-- heartbeat, the connector as a JSON object without its liveness); no row
-- for an unknown connector.
-- $1 connector_type, $2 endpoint_identity.
SELECT extract(epoch FROM now() - r.last_heartbeat_at)::double precision,
       json_build_object(
         'connector_type', r.connector_type,
         'endpoint_identity', r.endpoint_identity,
         'instance_id', r.instance_id,
         'state', r.state,
         'error_message', r.error_message,
         'version', r.version,
         'uptime_s', r.uptime_s,
         'last_heartbeat_at', r.last_heartbeat_at,
         'last_sent_at', r.last_sent_at,
         'first_seen_at', r.first_seen_at,
         'registered_via', r.registered_via,
         'checkpoint', json_build_object(
           'cursor', r.checkpoint_cursor,
           'updated_at', r.checkpoint_updated_at),
         'counters', r.counters)::text
FROM connector_registry r
WHERE r.connector_type = $1 AND r.endpoint_identity = $2
