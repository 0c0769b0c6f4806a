-- Routing: the plan of every request, each subrequest's dependency outcome,
-- dead letters, and the operator audit (spec 001 §15.4, §15.6, §15.12).

-- One plan per request: how it was decomposed and under which fanout mode,
-- join and abort policy. Written once; a request processed again after a
-- crash or a replay keeps its plan.
CREATE TABLE fanout_plans (
  request_id      uuid PRIMARY KEY,
  router          text NOT NULL,
  fallback        boolean NOT NULL,
  fallback_reason text,
  confidence      double precision NOT NULL,
  fanout_mode     text NOT NULL
                  CHECK (fanout_mode IN ('parallel', 'ordered', 'conditional')),
  -- 'all': the request ends when every subrequest has an outcome.
  join_policy     text NOT NULL,
  -- 'continue' (parallel, ordered) or 'skip_dependents' (conditional: a
  -- failed segment skips every later one).
  abort_policy    text NOT NULL,
  policy_tier     text NOT NULL,
  plan            jsonb NOT NULL,
  created_at      timestamptz NOT NULL DEFAULT now()
);

-- fanout_execution_log (§15.4): one row per planned subrequest with its
-- dependency outcome, attempts, and the last downstream response (raw and
-- normalized class, §6.3).
CREATE TABLE fanout_execution_log (
  request_id      uuid NOT NULL,
  segment_id      text NOT NULL,
  ordinal         integer NOT NULL,
  butler          text NOT NULL,
  prompt          text NOT NULL,
  -- pending → dispatched → ok | error | skipped
  state           text NOT NULL DEFAULT 'pending'
                  CHECK (state IN ('pending', 'dispatched', 'ok', 'error',
                                   'skipped')),
  -- Dispatch attempts so far (never reused: each is its own work item).
  attempts        integer NOT NULL DEFAULT 0,
  -- Attempts in the current round (a replay starts a new round).
  round_attempts  integer NOT NULL DEFAULT 0,
  work_id         text,
  error_class     text,
  error_message   text,
  raw_response    jsonb,
  updated_at      timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (request_id, segment_id)
);

-- Subrequests that failed past their retries (§15.6).
CREATE TABLE dead_letters (
  request_id    uuid NOT NULL,
  segment_id    text NOT NULL,
  butler        text NOT NULL,
  error_class   text NOT NULL,
  error_message text,
  attempts      integer NOT NULL,
  created_at    timestamptz NOT NULL DEFAULT now(),
  replayed_at   timestamptz,
  replay_count  integer NOT NULL DEFAULT 0,
  PRIMARY KEY (request_id, segment_id)
);
CREATE INDEX dead_letters_open ON dead_letters (created_at)
  WHERE replayed_at IS NULL;

-- Every operator action: who, when, why, and what came of it (§15.6,
-- §15.12).
CREATE TABLE operator_audit (
  id          bigserial PRIMARY KEY,
  at          timestamptz NOT NULL DEFAULT now(),
  who         text NOT NULL,
  action      text NOT NULL,
  request_id  uuid NOT NULL,
  segment_id  text,
  why         text NOT NULL,
  result      text NOT NULL,
  details     jsonb
);
CREATE INDEX operator_audit_request ON operator_audit (request_id);
