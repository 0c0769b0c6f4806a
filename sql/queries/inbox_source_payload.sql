-- The raw payload of a request's inbox row (the ingest.v1 body as its
-- connector submitted it): the messenger's adapters read the source message
-- they answer from it (a Telegram Update's chat and message, a mail's
-- headers). Every partition is probed by the primary key's request_id.
-- $1 request_id.
SELECT raw_payload FROM message_inbox WHERE request_id = $1::uuid LIMIT 1
