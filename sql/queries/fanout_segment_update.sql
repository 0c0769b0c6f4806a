-- Where subrequests stand (§15.4): state, attempts, the work item of the
-- last dispatch, and the last downstream response raw and normalized
-- (§6.3); also appends each route attempt to routing_log whose $10 is set.
-- Set-based: parameter i is the array of every statement's i-th value (see
-- inbox_store.cpp, `set_based`), in submission order. Of several updates
-- to one segment the last wins; its raw response is the last one given.
-- $1 request_id, $2 segment_id, $3 state, $4 attempts, $5 round_attempts,
-- $6 work_id ('' = none), $7 error_class ('' = none), $8 error_message,
-- $9 raw_response (JSON, '' = none), $10 'log' to record a route attempt,
-- $11 butler, $12 duration_ms ('' = none).
-- Returns the ordinal (1-based) of each statement whose segment exists.
-- Every table is reached through `= ANY` of the batch's keys, so a generic
-- plan (the statement is prepared) looks rows up by index at any size.
WITH t AS (
  SELECT *
  FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[],
              $6::text[], $7::text[], $8::text[], $9::text[], $10::text[],
              $11::text[], $12::text[]) WITH ORDINALITY
    AS t(request_id, segment_id, state, attempts, round_attempts, work_id,
         error_class, error_message, raw_response, log, butler, duration_ms,
         ord)
), last AS (
  -- The last statement per segment, and the last raw response given for
  -- it: a window over the batch (a correlated subquery or a join per row
  -- made the statement quadratic in the batch's size).
  SELECT DISTINCT ON (request_id, segment_id) t.*,
         first_value(raw_response) OVER (
           PARTITION BY request_id, segment_id
           ORDER BY raw_response <> '' DESC, ord DESC) AS last_raw
  FROM t
  ORDER BY request_id, segment_id, ord DESC
), upd AS (
  UPDATE fanout_execution_log l
  SET state = last.state, attempts = last.attempts::integer,
      round_attempts = last.round_attempts::integer,
      work_id = NULLIF(last.work_id, ''),
      error_class = NULLIF(last.error_class, ''),
      error_message = NULLIF(last.error_message, ''),
      raw_response = coalesce(NULLIF(last.last_raw, '')::jsonb,
                              l.raw_response),
      updated_at = now()
  FROM last
  WHERE l.request_id = ANY(($1::text[])::uuid[])
    AND l.request_id = last.request_id::uuid
    AND l.segment_id = last.segment_id
  RETURNING l.request_id, l.segment_id
), logged AS (
  INSERT INTO routing_log (request_id, source, target_butler, success,
                           duration_ms, error_class, error_message)
  SELECT request_id::uuid, 'switchboard', butler, state = 'ok',
         NULLIF(duration_ms, '')::double precision, NULLIF(error_class, ''),
         NULLIF(error_message, '')
  FROM t WHERE log = 'log'
  ORDER BY ord
)
SELECT t.ord
FROM t JOIN upd
  ON upd.request_id = t.request_id::uuid AND upd.segment_id = t.segment_id
ORDER BY t.ord
