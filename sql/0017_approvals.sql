-- approvals: a session's request to use a tool that needs a person's yes
-- (spec 003 §6.5, spec 001 §15.12; runtime/approvals.md). One row per
-- question: the run and butler that asked, the tool and a short summary of
-- its arguments (never the whole text), who may answer (the run's starter:
-- the channel, bot or endpoint, sender and chat or thread it came from),
-- the expiry, and who answered when. A run that is retried after a crash
-- asks the same question again (same work item, same ask_key) and finds
-- this row, pending or answered, instead of asking twice.
CREATE TABLE approvals (
  approval_id        uuid        PRIMARY KEY,
  run_id             text        NOT NULL,
  work_id            text        NOT NULL,
  butler             text        NOT NULL,
  tool               text        NOT NULL,
  summary            text        NOT NULL,
  ask_key            text        NOT NULL,
  requester_channel  text        NOT NULL,
  requester_endpoint text        NOT NULL DEFAULT '',
  requester_sender   text        NOT NULL,
  requester_thread   text        NOT NULL DEFAULT '',
  status             text        NOT NULL DEFAULT 'pending'
    CHECK (status IN ('pending', 'approved', 'denied', 'expired')),
  created_at         timestamptz NOT NULL DEFAULT now(),
  expires_at         timestamptz NOT NULL,
  answered_by        text,
  answered_at        timestamptz,
  -- Where the question was put (e.g. "telegram:<chat>:<message_id>"), so
  -- that the message can show the outcome.
  notice_ref         text        NOT NULL DEFAULT '',
  UNIQUE (work_id, ask_key)
);

-- The dashboard and the expiry sweep look for open questions only.
CREATE INDEX approvals_pending ON approvals (expires_at)
  WHERE status = 'pending';
CREATE INDEX approvals_run ON approvals (run_id);
