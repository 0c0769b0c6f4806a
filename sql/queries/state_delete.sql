-- Deletes a butler's state value (tool state_delete). $1 butler, $2 scope,
-- $3 key, $4 expected version (-1 any). Returns the deleted version, or
-- nothing when there was no such value (or its version did not match).
DELETE FROM butler_state
WHERE butler = $1::text AND scope = $2::text AND key = $3::text
  AND ($4::bigint = -1 OR version = $4::bigint)
RETURNING version
