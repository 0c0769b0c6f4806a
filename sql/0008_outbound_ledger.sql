-- The outbound ledger (DESIGN.md invariant 9; issue 23): every send to a
-- person through a channel adapter — a chunk of a chat message, a lifecycle
-- reaction, a mail — under a key (request, the delivery's segment, the part
-- of it), recorded 'sending' before it goes out and 'sent' (with the
-- provider's id, e.g. Telegram's message_id) after. A delivery that runs
-- again (a crash, a lease that expired) skips what is 'sent' and sends
-- again what it finds 'sending': the window between a send and its record,
-- which the messenger counts (butlers_messenger_redelivered_total). A send
-- that failed for good is 'dead' with its class, and its delivery is in
-- dead_letters. A reaction outranked by a later state of the same message
-- before it went out is 'skipped'.
--
-- Written by the inbox writer only (sql/queries/outbound_ledger_*.sql).
-- Reactions of a request are read together (the highest rank wins), which
-- the primary key's leading request_id serves.
CREATE TABLE outbound_ledger (
  request_id    uuid        NOT NULL,
  segment_id    text        NOT NULL,
  part          text        NOT NULL,
  adapter       text        NOT NULL,
  kind          text        NOT NULL
    CHECK (kind IN ('message', 'reaction', 'mail')),
  state         text        NOT NULL
    CHECK (state IN ('sending', 'sent', 'skipped', 'dead')),
  -- Reactions: the lifecycle state's order (later higher, terminal states
  -- above all) and its emoji.
  rank          bigint      NOT NULL DEFAULT 0,
  value         text        NOT NULL DEFAULT '',
  provider_id   text,
  -- Runs that began this send (1 + redeliveries and ambiguous retries).
  attempts      integer     NOT NULL DEFAULT 1,
  error_class   text,
  error_message text,
  created_at    timestamptz NOT NULL DEFAULT now(),
  updated_at    timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (request_id, segment_id, part)
);
