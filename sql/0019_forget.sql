-- Forgetting one person (runtime/forget.md): `butlers-node forget` and
-- POST /v1/operator/forget erase everything a sender wrote, everywhere.
--
-- forget_audit: one row per forget, written when it starts and completed
-- when it ends: who asked, why, when, the SHA-256 of the sender
-- ("channel:identity", never the identity itself) and how many rows each
-- table lost, never any text. A row left 'running' is a forget that
-- stopped midway (run it again: it is idempotent).
CREATE TABLE forget_audit (
  id            bigserial   PRIMARY KEY,
  started_at    timestamptz NOT NULL DEFAULT now(),
  finished_at   timestamptz,
  who           text        NOT NULL,
  why           text        NOT NULL,
  sender_sha256 text        NOT NULL CHECK (sender_sha256 ~ '^[0-9a-f]{64}$'),
  state         text        NOT NULL DEFAULT 'running'
    CHECK (state IN ('running', 'done', 'failed')),
  -- {"table": rows erased, ...}; only the tables that lost rows.
  counts        jsonb       NOT NULL DEFAULT '{}',
  total         bigint      NOT NULL DEFAULT 0
);
CREATE INDEX forget_audit_sender ON forget_audit (sender_sha256);

-- forget_tombstones: the requests (and thread runs, reminders) a forget
-- erased, by id only. A reply still owed to the person when the forget
-- ran finds its request here and is not sent (outbound_ledger_begin
-- answers 'skipped'). Ids are random UUIDs and say nothing about the
-- person; a forget prunes tombstones older than 30 days.
CREATE TABLE forget_tombstones (
  request_id   uuid        PRIMARY KEY,
  forgotten_at timestamptz NOT NULL DEFAULT now()
);
