-- Group commit of new requests: one statement for a whole batch.
-- $1..$13: parallel arrays, one element per request (already unique by
-- dedupe key within the batch). Returns the dedupe keys that were new; the
-- others are duplicates of rows stored earlier.
WITH input AS (
  SELECT t.*,
         timestamptz 'epoch' + t.received_us * interval '1 microsecond'
           AS received_at
  FROM unnest($1::uuid[], $2::bigint[], $3::text[], $4::text[], $5::text[],
              $6::text[], $7::text[], $8::text[], $9::text[], $10::text[],
              $11::text[], $12::text[], $13::text[])
    AS t(request_id, received_us, source_channel, source_endpoint_identity,
         source_sender_identity, source_thread_identity, trace_parent,
         raw_payload, normalized_text, policy_tier, schema_version,
         dedupe_key, trace_state)
), new_keys AS (
  INSERT INTO inbox_dedupe (dedupe_key, request_id, received_at)
  SELECT dedupe_key, request_id, received_at FROM input
  ON CONFLICT (dedupe_key) DO NOTHING
  RETURNING dedupe_key, request_id
), stored AS (
  INSERT INTO message_inbox (
    request_id, received_at, source_channel, source_endpoint_identity,
    source_sender_identity, source_thread_identity, trace_parent,
    raw_payload, normalized_text, policy_tier, schema_version, dedupe_key,
    trace_state)
  SELECT i.request_id, i.received_at, i.source_channel,
         i.source_endpoint_identity, i.source_sender_identity,
         i.source_thread_identity, i.trace_parent, i.raw_payload,
         i.normalized_text, i.policy_tier, i.schema_version, i.dedupe_key,
         i.trace_state
  FROM input i JOIN new_keys n USING (dedupe_key, request_id)
  RETURNING 1
)
SELECT dedupe_key FROM new_keys
