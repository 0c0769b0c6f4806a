-- The heartbeat log's partitions for the month of $1 (a timestamptz) and
-- the next one; returns the names of those created.
SELECT connector_heartbeat_ensure_partitions($1::timestamptz, 1)
