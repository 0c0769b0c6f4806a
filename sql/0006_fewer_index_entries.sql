-- Fewer index entries per message. Every row a message writes (and every
-- update that cannot stay on its page) adds one entry to each index of its
-- table: 34 per message before this migration, on the commits every
-- message waits for. Here an index goes when another serves its queries:
--
-- * route_work: the unique key leads with request_id (what the butlers'
--   duplicate check and request inspection look up), so the separate
--   request_id index is gone. ON CONFLICT (butler, request_id, segment_id)
--   infers the key from its set of columns, in any order.
-- * inbox_transitions and routing_log: append-only audit trails, read by
--   request (request inspection). The primary key is (request_id, id), and
--   the separate request_id indexes are gone, as is routing_log's
--   created_at index, which no query used.
--
-- Rebuilds these indexes once, under an exclusive lock: instant on a new
-- database, a pause while the node that applies it starts on a full one.
ALTER TABLE route_work
  DROP CONSTRAINT route_work_butler_request_id_segment_id_key,
  ADD CONSTRAINT route_work_request_butler_segment_key
    UNIQUE (request_id, butler, segment_id);
DROP INDEX route_work_request;

ALTER TABLE inbox_transitions
  DROP CONSTRAINT inbox_transitions_pkey,
  ADD PRIMARY KEY (request_id, id);
DROP INDEX inbox_transitions_request_idx;

ALTER TABLE routing_log
  DROP CONSTRAINT routing_log_pkey,
  ADD PRIMARY KEY (request_id, id);
DROP INDEX routing_log_request_idx;
DROP INDEX routing_log_created_idx;
