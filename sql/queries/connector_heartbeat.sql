-- One connector.heartbeat.v1 (actors/README.md, connector health):
-- registers an unknown (connector_type, endpoint_identity), appends to the
-- heartbeat log with the counter deltas since the connector's previous
-- heartbeat (connector_counter_delta: a restart counts from zero), and
-- makes it the registry's current state. Returns (registered, instance
-- changed, the five deltas).
-- $1 connector_type, $2 endpoint_identity, $3 instance_id, $4 version,
-- $5 state, $6 error_message, $7 uptime_s, $8 counters (JSON object),
-- $9 checkpoint cursor, $10 checkpoint updated_at, $11 sent_at,
-- $12 received_at (microseconds since the epoch). '' is NULL.
WITH prev AS (
  SELECT r.instance_id, r.counter_messages_ingested AS mi,
         r.counter_messages_failed AS mf, r.counter_source_api_calls AS sa,
         r.counter_checkpoint_saves AS cs, r.counter_dedupe_accepted AS da
  FROM connector_registry r
  WHERE r.connector_type = $1 AND r.endpoint_identity = $2
  FOR UPDATE
), cur AS (
  SELECT j AS counters,
         coalesce((j->>'messages_ingested')::bigint, 0) AS mi,
         coalesce((j->>'messages_failed')::bigint, 0) AS mf,
         coalesce((j->>'source_api_calls')::bigint, 0) AS sa,
         coalesce((j->>'checkpoint_saves')::bigint, 0) AS cs,
         coalesce((j->>'dedupe_accepted')::bigint, 0) AS da,
         timestamptz 'epoch' + $12::bigint * interval '1 microsecond'
           AS received_at
  FROM (SELECT $8::jsonb AS j) c
), d AS (
  SELECT cur.*,
         p.instance_id IS NULL AS registered,
         p.instance_id IS NOT NULL
           AND p.instance_id IS DISTINCT FROM NULLIF($3, '') AS restarted,
         connector_counter_delta(p.mi, cur.mi, p.instance_id = $3) AS dmi,
         connector_counter_delta(p.mf, cur.mf, p.instance_id = $3) AS dmf,
         connector_counter_delta(p.sa, cur.sa, p.instance_id = $3) AS dsa,
         connector_counter_delta(p.cs, cur.cs, p.instance_id = $3) AS dcs,
         connector_counter_delta(p.da, cur.da, p.instance_id = $3) AS dda
  FROM cur LEFT JOIN prev p ON true
), logged AS (
  INSERT INTO connector_heartbeat_log (
    connector_type, endpoint_identity, instance_id, state, error_message,
    uptime_s, counter_messages_ingested, counter_messages_failed,
    counter_source_api_calls, counter_checkpoint_saves,
    counter_dedupe_accepted, delta_messages_ingested, delta_messages_failed,
    delta_source_api_calls, delta_checkpoint_saves, delta_dedupe_accepted,
    received_at, sent_at)
  SELECT $1, $2, NULLIF($3, ''), $5, NULLIF($6, ''),
         NULLIF($7, '')::double precision, mi, mf, sa, cs, da,
         dmi, dmf, dsa, dcs, dda, received_at, NULLIF($11, '')::timestamptz
  FROM d
  RETURNING 1
), stored AS (
  INSERT INTO connector_registry AS r (
    connector_type, endpoint_identity, instance_id, version, state,
    error_message, uptime_s, last_heartbeat_at, last_sent_at, first_seen_at,
    counter_messages_ingested, counter_messages_failed,
    counter_source_api_calls, counter_checkpoint_saves,
    counter_dedupe_accepted, counters, checkpoint_cursor,
    checkpoint_updated_at)
  SELECT $1, $2, NULLIF($3, ''), NULLIF($4, ''), $5, NULLIF($6, ''),
         NULLIF($7, '')::double precision, received_at,
         NULLIF($11, '')::timestamptz, received_at, mi, mf, sa, cs, da,
         counters, NULLIF($9, ''), NULLIF($10, '')::timestamptz
  FROM d
  ON CONFLICT (connector_type, endpoint_identity) DO UPDATE
  SET instance_id = EXCLUDED.instance_id,
      version = EXCLUDED.version,
      state = EXCLUDED.state,
      error_message = EXCLUDED.error_message,
      uptime_s = EXCLUDED.uptime_s,
      last_heartbeat_at = greatest(r.last_heartbeat_at,
                                   EXCLUDED.last_heartbeat_at),
      last_sent_at = EXCLUDED.last_sent_at,
      counter_messages_ingested = EXCLUDED.counter_messages_ingested,
      counter_messages_failed = EXCLUDED.counter_messages_failed,
      counter_source_api_calls = EXCLUDED.counter_source_api_calls,
      counter_checkpoint_saves = EXCLUDED.counter_checkpoint_saves,
      counter_dedupe_accepted = EXCLUDED.counter_dedupe_accepted,
      counters = EXCLUDED.counters,
      checkpoint_cursor = coalesce(EXCLUDED.checkpoint_cursor,
                                   r.checkpoint_cursor),
      checkpoint_updated_at = coalesce(EXCLUDED.checkpoint_updated_at,
                                       r.checkpoint_updated_at)
  RETURNING 1
)
SELECT d.registered, d.restarted, d.dmi, d.dmf, d.dsa, d.dcs, d.dda
FROM d, logged, stored
