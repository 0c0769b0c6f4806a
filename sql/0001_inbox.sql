-- Ingress lifecycle storage (spec 001 §5, §11; spec 000 §4.1).
--
-- message_inbox is partitioned by month of received_at. Partitions are
-- created ahead and dropped after retention by the node (see
-- butlers_ensure_inbox_partitions / butlers_drop_inbox_partitions below).

CREATE TABLE message_inbox (
  request_id               uuid        NOT NULL,
  received_at              timestamptz NOT NULL,
  source_channel           text        NOT NULL,
  source_endpoint_identity text        NOT NULL,
  source_sender_identity   text        NOT NULL,
  source_thread_identity   text,
  trace_parent             text,
  -- Validated against ingest.v1 before it gets here; json (not jsonb) keeps
  -- the ingest path from re-parsing it into a binary form.
  raw_payload              json        NOT NULL,
  normalized_text          text        NOT NULL,
  policy_tier              text        NOT NULL DEFAULT 'default',
  schema_version           text        NOT NULL,
  dedupe_key               text        NOT NULL,
  decomposition            jsonb,
  dispatch_outcomes        jsonb,
  response_summary         jsonb,
  lifecycle_state          text        NOT NULL DEFAULT 'accepted'
    CHECK (lifecycle_state IN
           ('accepted', 'progress', 'parsed', 'errored', 'cancelled')),
  error_class              text,
  error_message            text,
  attempts                 integer     NOT NULL DEFAULT 0,
  lease_owner              text,
  lease_token              bigint      NOT NULL DEFAULT 0,
  lease_expires_at         timestamptz,
  progress_at              timestamptz,
  completed_at             timestamptz,
  updated_at               timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (request_id, received_at)
) PARTITION BY RANGE (received_at);

-- The cold path's two questions: old 'accepted' rows, expired 'progress'.
CREATE INDEX message_inbox_open_idx ON message_inbox (lifecycle_state, received_at)
  WHERE lifecycle_state IN ('accepted', 'progress');
-- Recent-first operational queries need no index of their own: request_id
-- is a UUIDv7, so the primary key is in time order.

-- Global dedupe: a unique index on a partitioned table must contain the
-- partition key, so the key -> canonical request mapping lives here.
-- Retention deletes from it once a month with a scan, so received_at has no
-- index: the ingest path pays for every index on every row.
CREATE TABLE inbox_dedupe (
  dedupe_key  text        PRIMARY KEY,
  request_id  uuid        NOT NULL,
  received_at timestamptz NOT NULL
);

-- Every lifecycle transition after 'accepted' (the inbox row itself records
-- that one), for audit and exactly-once checks.
CREATE TABLE inbox_transitions (
  id          bigserial   PRIMARY KEY,
  request_id  uuid        NOT NULL,
  from_state  text,
  to_state    text        NOT NULL,
  lease_owner text,
  at          timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX inbox_transitions_request_idx ON inbox_transitions (request_id);

-- Append-oriented record of route attempts (spec 001 §11).
CREATE TABLE routing_log (
  id            bigserial   PRIMARY KEY,
  request_id    uuid        NOT NULL,
  source        text        NOT NULL,
  target_butler text        NOT NULL,
  tool          text        NOT NULL DEFAULT 'route.execute',
  success       boolean     NOT NULL,
  duration_ms   double precision,
  error_class   text,
  error_message text,
  created_at    timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX routing_log_request_idx ON routing_log (request_id);
CREATE INDEX routing_log_created_idx ON routing_log (created_at DESC);

-- Creates the partitions of message_inbox for the current month and the
-- `ahead` following months (idempotent). Returns how many it created.
CREATE FUNCTION butlers_ensure_inbox_partitions(ahead integer)
RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
  first_month date := date_trunc('month', now() AT TIME ZONE 'UTC')::date;
  m date;
  part text;
  created integer := 0;
BEGIN
  FOR i IN 0..ahead LOOP
    m := (first_month + make_interval(months => i))::date;
    part := 'message_inbox_' || to_char(m, 'YYYYMM');
    IF to_regclass(part) IS NULL THEN
      EXECUTE format(
        'CREATE TABLE %I PARTITION OF message_inbox '
        'FOR VALUES FROM (%L) TO (%L)',
        part, (m::timestamp AT TIME ZONE 'UTC'),
        ((m + interval '1 month')::timestamp AT TIME ZONE 'UTC'));
      created := created + 1;
    END IF;
  END LOOP;
  RETURN created;
END $$;

-- Drops the partitions of message_inbox that lie entirely before the
-- current month minus `retention_months`, with their dedupe entries.
-- Returns the names of the dropped partitions.
CREATE FUNCTION butlers_drop_inbox_partitions(retention_months integer)
RETURNS SETOF text LANGUAGE plpgsql AS $$
DECLARE
  cutoff timestamptz := (date_trunc('month', now() AT TIME ZONE 'UTC')
                         - make_interval(months => retention_months))
                        AT TIME ZONE 'UTC';
  part record;
  upper_bound timestamptz;
BEGIN
  FOR part IN
    SELECT c.relname,
           pg_get_expr(c.relpartbound, c.oid) AS bound
    FROM pg_inherits i
    JOIN pg_class c ON c.oid = i.inhrelid
    WHERE i.inhparent = 'message_inbox'::regclass
    ORDER BY c.relname
  LOOP
    upper_bound := substring(part.bound from 'TO \(''([^'']+)''\)')::timestamptz;
    IF upper_bound IS NOT NULL AND upper_bound <= cutoff THEN
      EXECUTE format('DROP TABLE %I', part.relname);
      DELETE FROM inbox_dedupe WHERE received_at < upper_bound;
      RETURN NEXT part.relname;
    END IF;
  END LOOP;
END $$;
