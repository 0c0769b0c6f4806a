-- Lists state keys by prefix (tool state_list), in key order after cursor
-- $4 ('' = from the start), at most $5 rows. $1 butler, $2 scope, $3
-- prefix. Returns key, version, value (JSON text).
SELECT key, version, value::text
FROM butler_state
WHERE butler = $1::text AND scope = $2::text
  AND left(key, length($3::text)) = $3::text
  AND key > $4::text
ORDER BY key
LIMIT $5::integer
