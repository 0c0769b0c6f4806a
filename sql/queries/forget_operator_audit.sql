-- forget (runtime/forget.md): operator actions on the requests (their reasons may quote the person; the forget's own audit is forget_audit).
-- $1 uuid[] the batch's request ids. Returns the rows erased.
WITH d AS (DELETE FROM operator_audit WHERE request_id = ANY($1::uuid[]) RETURNING 1)
SELECT count(*) FROM d
