-- Retention of what people wrote (runtime/retention.md, config/README.md
-- `[retention]`): the indexes that let the retention find its next batch
-- without scanning a table, so a batch costs what it removes.
--
-- Content (people's text) of finished rows is found through partial
-- indexes that hold only the rows still to redact: a row enters one when
-- it finishes (an update that already changes an indexed column, so no
-- write that was HOT becomes non-HOT) and leaves it when redacted. Nothing
-- the ingest path inserts is in them.
CREATE INDEX message_inbox_unredacted ON message_inbox (completed_at)
  WHERE lifecycle_state IN ('parsed', 'errored', 'cancelled')
    AND raw_payload <> '';
CREATE INDEX route_work_unredacted ON route_work (finished_at)
  WHERE state IN ('ok', 'error', 'cancelled') AND envelope::text <> '{}';

-- Append-only trails deleted by age: BRIN indexes (a few pages each, next
-- to nothing per insert) on the time they were written, in insert order.
CREATE INDEX inbox_transitions_at_brin ON inbox_transitions USING brin (at);
CREATE INDEX routing_log_created_brin ON routing_log USING brin (created_at);
CREATE INDEX operator_audit_at_brin ON operator_audit USING brin (at);
CREATE INDEX tool_calls_created_brin ON tool_calls USING brin (created_at);
CREATE INDEX dead_letters_created_brin ON dead_letters USING brin (created_at);
CREATE INDEX fanout_plans_created_brin ON fanout_plans USING brin (created_at);
CREATE INDEX outbound_ledger_created_brin
  ON outbound_ledger USING brin (created_at);
CREATE INDEX route_work_created_brin ON route_work USING brin (created_at);

-- The transcript is deleted by age, message by message, outside the
-- ingest path.
CREATE INDEX thread_transcript_created ON thread_transcript (created_at);
