-- Where one subrequest stands (§15.4): state, attempts, the work item of
-- its last dispatch, and the last downstream response raw and normalized
-- (§6.3). Also appends the route attempt to routing_log when $10 is set.
-- $1 request_id, $2 segment_id, $3 state, $4 attempts, $5 round_attempts,
-- $6 work_id ('' = none), $7 error_class ('' = none), $8 error_message,
-- $9 raw_response (JSON, '' = none), $10 'log' to record a route attempt,
-- $11 butler, $12 duration_ms.
WITH upd AS (
  UPDATE fanout_execution_log
  SET state = $3, attempts = $4::integer, round_attempts = $5::integer,
      work_id = NULLIF($6, ''), error_class = NULLIF($7, ''),
      error_message = NULLIF($8, ''),
      raw_response = coalesce(NULLIF($9, '')::jsonb, raw_response),
      updated_at = now()
  WHERE request_id = $1::uuid AND segment_id = $2
  RETURNING 1
), logged AS (
  INSERT INTO routing_log (request_id, source, target_butler, success,
                           duration_ms, error_class, error_message)
  SELECT $1::uuid, 'switchboard', $11, $3 = 'ok',
         NULLIF($12, '')::double precision, NULLIF($7, ''), NULLIF($8, '')
  WHERE $10 = 'log'
)
SELECT count(*) FROM upd
