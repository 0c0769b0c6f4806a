-- Where each connector's source stopped reading (README "Connectors"): a
-- JSONL connector keeps the line number and byte offset after the last
-- line whose commit it saw, so a restart resumes there. One row per
-- (connector, key); the value is the source's own text (JSON for jsonl).
-- Written through the inbox writer after each commit, read at start.

CREATE TABLE connector_checkpoints (
  connector text NOT NULL,
  key text NOT NULL,
  value text NOT NULL,
  updated_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (connector, key)
);
