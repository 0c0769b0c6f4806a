-- Attachments (runtime/attachments.md): photos, voice notes, documents
-- people send. Content-addressed: the key is the SHA-256 of the bytes, so
-- storing the same file twice is one row, and a store retried after a
-- crash is harmless. The bytes are written on a connection of their own
-- before the message that names them is ingested (never inside the inbox
-- writer's group commit), so a message only ever names stored bytes;
-- rows nobody names any more go with the retention
-- (`attachments.retention_days`, counted from the last time the bytes were
-- stored).
CREATE TABLE attachments (
  sha256 text PRIMARY KEY CHECK (sha256 ~ '^[0-9a-f]{64}$'),
  media_type text NOT NULL,
  size_bytes bigint NOT NULL CHECK (size_bytes >= 0),
  data bytea NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  CHECK (octet_length(data) = size_bytes)
);

-- The retention sweep deletes the oldest first.
CREATE INDEX attachments_created ON attachments (created_at);
