-- Terminal transitions of claimed rows, fenced: a row moves only while it
-- is still 'progress' under the presenting lease token, so a worker whose
-- lease expired cannot overwrite its successor's outcome.
-- $1: uuid[], $2: bigint[] received_at (µs), $3: bigint[] lease tokens,
-- $4: text[] states, $5: text[] error classes, $6: text[] messages,
-- $7: the writer's lease owner name (for the transition log), $8: text[]
-- dispatch outcomes and $9: text[] response summaries (JSON; NULL keeps
-- what is stored).
-- Rows are found by primary key with `= ANY` of the ids and a range of the
-- receipt times, and the state test is a CASE so that the open-rows
-- partial index stays out of the plan (see inbox_claim.sql for both).
WITH c AS (
  SELECT t.request_id, t.lease_token, t.state, t.error_class,
         t.error_message, t.outcomes, t.summary
  FROM unnest($1::uuid[], $3::bigint[], $4::text[], $5::text[], $6::text[],
              $8::text[], $9::text[])
    AS t(request_id, lease_token, state, error_class, error_message,
         outcomes, summary)
), done AS (
  UPDATE message_inbox m
  SET lifecycle_state = c.state,
      error_class = c.error_class,
      error_message = c.error_message,
      dispatch_outcomes = coalesce(c.outcomes::jsonb, m.dispatch_outcomes),
      response_summary = coalesce(c.summary::jsonb, m.response_summary),
      completed_at = now(),
      lease_owner = NULL,
      lease_expires_at = NULL,
      updated_at = now()
  FROM c
  WHERE m.request_id = ANY($1::uuid[])
    AND m.received_at BETWEEN
          (SELECT timestamptz 'epoch' + min(us) * interval '1 microsecond'
           FROM unnest($2::bigint[]) AS us)
      AND (SELECT timestamptz 'epoch' + max(us) * interval '1 microsecond'
           FROM unnest($2::bigint[]) AS us)
    AND m.request_id = c.request_id
    AND CASE m.lifecycle_state WHEN 'progress' THEN true ELSE false END
    AND m.lease_token = c.lease_token
  RETURNING m.request_id, m.lifecycle_state
), logged AS (
  INSERT INTO inbox_transitions (request_id, from_state, to_state, lease_owner)
  SELECT request_id, 'progress', lifecycle_state, $7 FROM done
)
SELECT request_id::text FROM done
