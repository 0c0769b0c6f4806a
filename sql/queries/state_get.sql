-- Reads one state value (tool state_get). $1 butler, $2 scope, $3 key.
-- Returns value (JSON text), version, updated_at (RFC 3339), or no row.
SELECT value::text, version,
       to_char(updated_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')
FROM butler_state
WHERE butler = $1::text AND scope = $2::text AND key = $3::text
