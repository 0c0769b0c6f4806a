-- Clean shutdown: hands claimed requests back at once. A 'progress' row's
-- lease ends now and has no owner, so the cold path's next sweep (on a
-- restart or a peer) claims it again instead of after `lease_s`. Fenced:
-- a row whose lease token no longer matches (it passed to another holder)
-- or that is terminal is untouched.
-- $1 uuid[] request ids, $2 bigint[] received_at (Unix µs), $3 bigint[]
-- lease tokens. Found by primary key with `= ANY` of the ids and a range
-- of the receipt times (see inbox_claim.sql). Returns each released id.
WITH t AS (
  SELECT *
  FROM unnest($1::uuid[], $2::bigint[], $3::bigint[])
    AS t(request_id, received_us, lease_token)
), released AS (
  UPDATE message_inbox m
  SET lease_owner = NULL,
      lease_expires_at = now(),
      updated_at = now()
  FROM t
  WHERE m.request_id = ANY($1::uuid[])
    AND m.received_at BETWEEN
          (SELECT timestamptz 'epoch' + min(us) * interval '1 microsecond'
           FROM unnest($2::bigint[]) AS us)
      AND (SELECT timestamptz 'epoch' + max(us) * interval '1 microsecond'
           FROM unnest($2::bigint[]) AS us)
    AND m.request_id = t.request_id
    AND m.received_at
          = timestamptz 'epoch' + t.received_us * interval '1 microsecond'
    AND m.lease_token = t.lease_token
    AND CASE m.lifecycle_state WHEN 'progress' THEN true ELSE false END
  RETURNING m.request_id
)
SELECT request_id::text FROM released
