-- Claims a batch of rows for processing: 'accepted', or 'progress' whose
-- lease expired, → 'progress' with a lease for $3 of $4 seconds and a new
-- fencing token. A row held by someone else, or terminal, is skipped.
-- $1: uuid[] request ids, $2: bigint[] received_at (Unix µs).
-- The rows are found with `= ANY` of the request ids on the primary key,
-- and a range of the batch's receipt times (for partition pruning). Not
-- `received_at = ANY` as well: with two arrays a btree scan probes every
-- pair (150 x 150 probes for 150 rows, the plan a database without
-- statistics chose; request ids are unique anyway). The state test is a CASE on purpose: the planner
-- cannot prove the open-rows partial index's predicate from it, so it never
-- ANDs in a scan of that index, which grows with the backlog (with stale
-- statistics it did, and a 3-row claim took 2-15 ms instead of 0.1).
WITH claimed AS (
  UPDATE message_inbox m
  SET lifecycle_state = 'progress',
      lease_owner = $3,
      lease_token = m.lease_token + 1,
      lease_expires_at = now() + make_interval(secs => $4),
      attempts = m.attempts + 1,
      progress_at = now(),
      updated_at = now()
  WHERE m.request_id = ANY($1::uuid[])
    AND m.received_at BETWEEN
          (SELECT timestamptz 'epoch' + min(us) * interval '1 microsecond'
           FROM unnest($2::bigint[]) AS us)
      AND (SELECT timestamptz 'epoch' + max(us) * interval '1 microsecond'
           FROM unnest($2::bigint[]) AS us)
    AND CASE m.lifecycle_state
          WHEN 'accepted' THEN true
          WHEN 'progress' THEN m.lease_expires_at < now()
          ELSE false
        END
  RETURNING m.request_id, m.lease_token, m.attempts, m.received_at,
            m.source_channel, m.source_endpoint_identity,
            m.source_sender_identity, m.source_thread_identity,
            m.trace_parent, m.normalized_text, m.policy_tier, m.trace_state,
            -- The envelope only when it may name attachments (the reader
            -- takes payload.attachments out of it): no other row pays for
            -- returning its payload.
            CASE WHEN strpos(m.raw_payload, '"attachments"') > 0
                 THEN m.raw_payload ELSE '' END AS attachment_payload
), logged AS (
  INSERT INTO inbox_transitions (request_id, from_state, to_state, lease_owner)
  SELECT request_id,
         CASE WHEN attempts > 1 THEN 'progress' ELSE 'accepted' END,
         'progress', $3
  FROM claimed
)
-- The claimed row's context and text come back with the claim, so the
-- worker needs no second round trip before it routes.
SELECT request_id::text, lease_token,
       (extract(epoch FROM received_at) * 1000000)::bigint, source_channel,
       source_endpoint_identity, source_sender_identity,
       coalesce(source_thread_identity, ''), coalesce(trace_parent, ''),
       normalized_text, policy_tier, coalesce(trace_state, ''),
       attachment_payload
FROM claimed
