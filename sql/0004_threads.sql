-- Conversation threads (spec 003): threads, their runs, and the transcript.
-- Every user turn is stored before it is applied; UNIQUE (thread_id,
-- message_id) makes a retried turn find the original and answer the same
-- run. `cursor` grows monotonically; one thread's writes are serialized by
-- its actor, so a client that saw cursor N backfills everything after it
-- with `cursor > N`.

CREATE TABLE threads (
  thread_id text PRIMARY KEY,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE thread_runs (
  run_id uuid PRIMARY KEY,
  thread_id text NOT NULL REFERENCES threads (thread_id),
  butler text NOT NULL,
  -- queued: waits behind the active run; accepted: handed to its butler;
  -- running: its butler stored the work item; then ok | error | cancelled.
  state text NOT NULL CHECK (state IN ('queued', 'accepted', 'running', 'ok',
                                       'error', 'cancelled')),
  work_id uuid,
  error_class text,
  error_message text,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX thread_runs_open ON thread_runs (thread_id)
  WHERE state IN ('queued', 'accepted', 'running');

CREATE TABLE thread_transcript (
  cursor bigserial PRIMARY KEY,
  thread_id text NOT NULL REFERENCES threads (thread_id),
  message_id text NOT NULL,
  role text NOT NULL CHECK (role IN ('user', 'assistant')),
  -- user: start | steer | queued; assistant: reply | error | cancelled.
  kind text NOT NULL,
  run_id uuid NOT NULL,
  butler text NOT NULL,
  body text NOT NULL,
  -- assistant: the butler's result object (scripted: turns and the steer
  -- inputs each turn saw).
  detail json,
  created_at timestamptz NOT NULL DEFAULT now(),
  UNIQUE (thread_id, message_id)
);

CREATE INDEX thread_transcript_thread ON thread_transcript (thread_id, cursor);
