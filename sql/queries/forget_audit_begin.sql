-- forget: the audit row, before anything is erased. $1 who, $2 why, $3
-- SHA-256 of "channel:identity". Returns its id.
INSERT INTO forget_audit (who, why, sender_sha256) VALUES ($1, $2, $3)
RETURNING id::text
