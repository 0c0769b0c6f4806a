-- Connector health and statistics (spec 001 §17.5–§17.7; README "Connector
-- health and statistics"). Heartbeats (connector.heartbeat.v1) self-register
-- connectors in connector_registry and append to connector_heartbeat_log,
-- with the counter deltas since the previous heartbeat; rollups fill the
-- hourly, daily and fanout tables. Liveness is never stored: it is derived
-- from last_heartbeat_at when read.

CREATE TABLE connector_registry (
  connector_type        text        NOT NULL,
  endpoint_identity     text        NOT NULL,
  instance_id           text,
  version               text,
  -- healthy | degraded | error, as the connector last reported.
  state                 text        NOT NULL DEFAULT 'unknown',
  error_message         text,
  uptime_s              double precision,
  last_heartbeat_at     timestamptz,
  last_sent_at          timestamptz,
  first_seen_at         timestamptz NOT NULL DEFAULT now(),
  registered_via        text        NOT NULL DEFAULT 'self',
  -- The latest counter snapshot (monotonic since the instance started).
  counter_messages_ingested bigint NOT NULL DEFAULT 0,
  counter_messages_failed   bigint NOT NULL DEFAULT 0,
  counter_source_api_calls  bigint NOT NULL DEFAULT 0,
  counter_checkpoint_saves  bigint NOT NULL DEFAULT 0,
  counter_dedupe_accepted   bigint NOT NULL DEFAULT 0,
  -- Every counter of the last heartbeat, connector-specific ones included.
  counters              jsonb       NOT NULL DEFAULT '{}',
  checkpoint_cursor     text,
  checkpoint_updated_at timestamptz,
  PRIMARY KEY (connector_type, endpoint_identity)
);

-- Append-only history, month-partitioned on received_at; 7 days are kept
-- (connector_stats_prune). delta_* are the counters' growth since the
-- previous heartbeat of the connector: the rollups' input.
CREATE TABLE connector_heartbeat_log (
  connector_type            text        NOT NULL,
  endpoint_identity         text        NOT NULL,
  instance_id               text,
  state                     text        NOT NULL,
  error_message             text,
  uptime_s                  double precision,
  counter_messages_ingested bigint      NOT NULL,
  counter_messages_failed   bigint      NOT NULL,
  counter_source_api_calls  bigint      NOT NULL,
  counter_checkpoint_saves  bigint      NOT NULL,
  counter_dedupe_accepted   bigint      NOT NULL,
  delta_messages_ingested   bigint      NOT NULL,
  delta_messages_failed     bigint      NOT NULL,
  delta_source_api_calls    bigint      NOT NULL,
  delta_checkpoint_saves    bigint      NOT NULL,
  delta_dedupe_accepted     bigint      NOT NULL,
  received_at               timestamptz NOT NULL,
  sent_at                   timestamptz
) PARTITION BY RANGE (received_at);
CREATE INDEX connector_heartbeat_log_bucket
  ON connector_heartbeat_log (received_at, connector_type, endpoint_identity);

CREATE TABLE connector_stats_hourly (
  connector_type    text        NOT NULL,
  endpoint_identity text        NOT NULL,
  hour              timestamptz NOT NULL,
  messages_ingested bigint      NOT NULL DEFAULT 0,
  messages_failed   bigint      NOT NULL DEFAULT 0,
  source_api_calls  bigint      NOT NULL DEFAULT 0,
  dedupe_accepted   bigint      NOT NULL DEFAULT 0,
  heartbeat_count   integer     NOT NULL DEFAULT 0,
  healthy_count     integer     NOT NULL DEFAULT 0,
  degraded_count    integer     NOT NULL DEFAULT 0,
  error_count       integer     NOT NULL DEFAULT 0,
  PRIMARY KEY (connector_type, endpoint_identity, hour)
);
CREATE INDEX connector_stats_hourly_hour ON connector_stats_hourly (hour);

CREATE TABLE connector_stats_daily (
  connector_type    text    NOT NULL,
  endpoint_identity text    NOT NULL,
  day               date    NOT NULL,
  messages_ingested bigint  NOT NULL DEFAULT 0,
  messages_failed   bigint  NOT NULL DEFAULT 0,
  source_api_calls  bigint  NOT NULL DEFAULT 0,
  dedupe_accepted   bigint  NOT NULL DEFAULT 0,
  heartbeat_count   integer NOT NULL DEFAULT 0,
  healthy_count     integer NOT NULL DEFAULT 0,
  degraded_count    integer NOT NULL DEFAULT 0,
  error_count       integer NOT NULL DEFAULT 0,
  -- Heartbeat coverage: hours of the day with a healthy heartbeat, in per
  -- cent of the hours the connector was known that day.
  uptime_pct        real,
  PRIMARY KEY (connector_type, endpoint_identity, day)
);
CREATE INDEX connector_stats_daily_day ON connector_stats_daily (day);

-- Requests of each connector (source channel and endpoint identity of the
-- inbox row) dispatched to each butler, by day the request was received.
CREATE TABLE connector_fanout_daily (
  connector_type    text   NOT NULL,
  endpoint_identity text   NOT NULL,
  target_butler     text   NOT NULL,
  day               date   NOT NULL,
  message_count     bigint NOT NULL DEFAULT 0,
  PRIMARY KEY (connector_type, endpoint_identity, target_butler, day)
);
CREATE INDEX connector_fanout_daily_day ON connector_fanout_daily (day);

-- A counter's growth between two heartbeats. No previous heartbeat, another
-- instance, or a smaller value (the process restarted and counts from
-- zero again): the whole new value is growth.
CREATE FUNCTION connector_counter_delta(prev bigint, cur bigint,
                                        same_instance boolean)
RETURNS bigint LANGUAGE sql IMMUTABLE AS $$
  SELECT CASE
    WHEN prev IS NULL OR NOT coalesce(same_instance, false) OR cur < prev
      THEN cur
    ELSE cur - prev
  END
$$;

-- Heartbeat coverage of [from_at, to_at) as a percentage: hours with a
-- healthy heartbeat over the hours the connector was known (from the hour
-- of its first heartbeat, up to the current hour). NULL when none.
CREATE FUNCTION connector_uptime_pct(ctype text, ident text,
                                     from_at timestamptz, to_at timestamptz)
RETURNS real LANGUAGE sql STABLE AS $$
  WITH bounds AS (
    SELECT greatest(from_at, date_trunc('hour', r.first_seen_at)) AS lo,
           least(to_at, date_trunc('hour', now()) + interval '1 hour') AS hi
    FROM connector_registry r
    WHERE r.connector_type = ctype AND r.endpoint_identity = ident
  ), covered AS (
    SELECT count(*) AS n
    FROM connector_stats_hourly h, bounds b
    WHERE h.connector_type = ctype AND h.endpoint_identity = ident
      AND h.hour >= b.lo AND h.hour < b.hi AND h.healthy_count > 0
  )
  SELECT CASE WHEN b.hi <= b.lo THEN NULL
              ELSE least(100, 100.0 * c.n
                         / ceil(extract(epoch FROM b.hi - b.lo) / 3600))::real
         END
  FROM bounds b, covered c
$$;

-- Creates the monthly partitions of connector_heartbeat_log for the month
-- of `at` and the `ahead` following ones (idempotent). Returns the names
-- of those it created.
CREATE FUNCTION connector_heartbeat_ensure_partitions(at timestamptz,
                                                      ahead integer)
RETURNS SETOF text LANGUAGE plpgsql AS $$
DECLARE
  first_month date := date_trunc('month', at AT TIME ZONE 'UTC')::date;
  m date;
  part text;
BEGIN
  FOR i IN 0..ahead LOOP
    m := (first_month + make_interval(months => i))::date;
    part := 'connector_heartbeat_log_' || to_char(m, 'YYYYMM');
    IF to_regclass(part) IS NULL THEN
      EXECUTE format(
        'CREATE TABLE %I PARTITION OF connector_heartbeat_log '
        'FOR VALUES FROM (%L) TO (%L)',
        part, (m::timestamp AT TIME ZONE 'UTC'),
        ((m + interval '1 month')::timestamp AT TIME ZONE 'UTC'));
      RETURN NEXT part;
    END IF;
  END LOOP;
END $$;

-- Retention relative to `at` (spec 001 §17.6): heartbeat log 7 days (a
-- partition lying wholly before the cutoff is dropped; older rows of the
-- others are deleted), hourly stats 30 days, daily and fanout stats one
-- year. Returns what it removed, one row per table or partition touched:
-- (action, relation, rows).
CREATE FUNCTION connector_stats_prune(at timestamptz)
RETURNS TABLE (action text, relation text, removed bigint)
LANGUAGE plpgsql AS $$
DECLARE
  cutoff timestamptz := at - interval '7 days';
  part record;
  upper_bound timestamptz;
  n bigint;
BEGIN
  FOR part IN
    SELECT c.relname, pg_get_expr(c.relpartbound, c.oid) AS bound
    FROM pg_inherits i
    JOIN pg_class c ON c.oid = i.inhrelid
    WHERE i.inhparent = 'connector_heartbeat_log'::regclass
    ORDER BY c.relname
  LOOP
    upper_bound := substring(part.bound from 'TO \(''([^'']+)''\)')::timestamptz;
    IF upper_bound IS NOT NULL AND upper_bound <= cutoff THEN
      EXECUTE format('SELECT count(*) FROM %I', part.relname) INTO n;
      EXECUTE format('DROP TABLE %I', part.relname);
      action := 'drop_partition'; relation := part.relname; removed := n;
      RETURN NEXT;
    END IF;
  END LOOP;
  DELETE FROM connector_heartbeat_log WHERE received_at < cutoff;
  GET DIAGNOSTICS n = ROW_COUNT;
  IF n > 0 THEN
    action := 'delete_rows'; relation := 'connector_heartbeat_log';
    removed := n;
    RETURN NEXT;
  END IF;
  DELETE FROM connector_stats_hourly WHERE hour < at - interval '30 days';
  GET DIAGNOSTICS n = ROW_COUNT;
  IF n > 0 THEN
    action := 'delete_rows'; relation := 'connector_stats_hourly';
    removed := n;
    RETURN NEXT;
  END IF;
  DELETE FROM connector_stats_daily
  WHERE day < ((at - interval '1 year') AT TIME ZONE 'UTC')::date;
  GET DIAGNOSTICS n = ROW_COUNT;
  IF n > 0 THEN
    action := 'delete_rows'; relation := 'connector_stats_daily';
    removed := n;
    RETURN NEXT;
  END IF;
  DELETE FROM connector_fanout_daily
  WHERE day < ((at - interval '1 year') AT TIME ZONE 'UTC')::date;
  GET DIAGNOSTICS n = ROW_COUNT;
  IF n > 0 THEN
    action := 'delete_rows'; relation := 'connector_fanout_daily';
    removed := n;
    RETURN NEXT;
  END IF;
END $$;

SELECT connector_heartbeat_ensure_partitions(now(), 1);
