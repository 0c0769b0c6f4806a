-- What a butler's sessions keep through their tools (actors/tool_server.hpp,
-- README "Give your butler tools").
--
-- butler_state: each butler's own key-value store. A value is JSON with a
-- version that every write raises by one, so a session can compare-and-set
-- (state_put with expected_version). `scope` is '' for the butler's shared
-- namespace, or 'sender:<channel>:<sender>' for one person's.
CREATE TABLE butler_state (
  butler     text        NOT NULL,
  scope      text        NOT NULL DEFAULT '',
  key        text        NOT NULL,
  value      jsonb       NOT NULL,
  version    bigint      NOT NULL DEFAULT 1,
  updated_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (butler, scope, key)
);

-- butler_reminders: one-shot triggers a session set for its butler. A due
-- reminder is claimed ('firing', with a lease) by one node's tool server,
-- which hands it to its butler as a work item whose request id is the
-- reminder's id (route_work's unique key makes a second hand-over a
-- duplicate), then marks it 'fired'. A node that dies between claim and
-- mark leaves the lease to expire; the next sweep hands it over again and
-- finds the work item already stored: exactly one session per reminder.
-- The asker's address is kept so that the session's tools reach them.
CREATE TABLE butler_reminders (
  reminder_id      uuid        PRIMARY KEY,
  butler           text        NOT NULL,
  due_at           timestamptz NOT NULL,
  payload          text        NOT NULL,
  state            text        NOT NULL DEFAULT 'pending'
    CHECK (state IN ('pending', 'firing', 'fired', 'cancelled')),
  lease_until      timestamptz,
  source_channel   text        NOT NULL,
  source_endpoint  text        NOT NULL,
  source_sender    text        NOT NULL,
  source_thread    text        NOT NULL DEFAULT '',
  origin_request   uuid        NOT NULL,
  origin_work      uuid        NOT NULL,
  created_at       timestamptz NOT NULL DEFAULT now(),
  fired_at         timestamptz
);

-- The sweep finds due reminders by time, open ones only.
CREATE INDEX butler_reminders_due ON butler_reminders (due_at)
  WHERE state IN ('pending', 'firing');
CREATE INDEX butler_reminders_sender
  ON butler_reminders (butler, source_channel, source_sender)
  WHERE state = 'pending';

-- tool_calls: what each session's tool calls did, for request inspection
-- (GET /v1/requests/{id}). Arguments are kept as their key names only
-- unless [tools] record_arguments is on: they may hold what people wrote.
CREATE TABLE tool_calls (
  id          bigserial   PRIMARY KEY,
  request_id  uuid        NOT NULL,
  work_id     uuid        NOT NULL,
  butler      text        NOT NULL,
  tool        text        NOT NULL,
  outcome     text        NOT NULL,
  duration_ms double precision NOT NULL,
  arguments   jsonb       NOT NULL,
  created_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX tool_calls_request ON tool_calls (request_id);
