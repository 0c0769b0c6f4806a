-- Seconds since each connector's last heartbeat (NULL: never), for the
-- butlers_connectors{liveness} gauge.
SELECT extract(epoch FROM now() - last_heartbeat_at)::double precision
FROM connector_registry
