-- W3C tracestate (issue 26): the `control.trace_context.tracestate` sent
-- with the ingest envelope, kept beside trace_parent and carried in every
-- route.v1 as trace_context.tracestate. NULL when none was sent, or when it
-- was dropped at ingest (over 512 bytes, more than 32 list members, or not
-- a well-formed list; a tracestate never makes an ingest fail).
ALTER TABLE message_inbox ADD COLUMN trace_state text;
