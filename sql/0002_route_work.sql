-- Butlers' route inboxes (spec 000 §4.4, accept-then-process): one row per
-- work item a butler accepted through route.execute or a schedule. The row
-- is the durable half of the butler's pending queue: while open ('queued',
-- 'running') it is leased by the node whose butler holds it, and every
-- write of a result must present the lease token (fencing), so a holder
-- whose lease passed to another node cannot write.

CREATE TABLE route_work (
  work_id          uuid PRIMARY KEY,
  butler           text NOT NULL,
  request_id       uuid NOT NULL,
  -- '' when the request was not decomposed; with request_id the downstream
  -- dedupe identity of spec 001 §10.1.
  segment_id       text NOT NULL DEFAULT '',
  subrequest_id    text,
  -- 'route' (dispatched by the switchboard), 'trigger' (by a session),
  -- 'schedule', 'switchboard' (deliveries to the messenger).
  trigger_source   text NOT NULL,
  origin_butler    text,
  envelope         json NOT NULL,
  state            text NOT NULL DEFAULT 'queued'
                   CHECK (state IN ('queued', 'running', 'ok', 'error',
                                    'cancelled')),
  lease_owner      text,
  lease_expires_at timestamptz,
  lease_token      bigint NOT NULL DEFAULT 1,
  -- Sessions started for this item (a crash mid-session counts).
  attempts         integer NOT NULL DEFAULT 0,
  created_at       timestamptz NOT NULL DEFAULT now(),
  started_at       timestamptz,
  finished_at      timestamptz,
  -- The final route_response.v1 and its normalized error class.
  response         json,
  error_class      text,
  UNIQUE (butler, request_id, segment_id)
);

-- Recovery finds open items of one butler whose lease expired.
CREATE INDEX route_work_open ON route_work (butler, lease_expires_at)
  WHERE state IN ('queued', 'running');
CREATE INDEX route_work_request ON route_work (request_id);
