-- The canonical request of each duplicate dedupe key ($1: text[]).
SELECT dedupe_key, request_id::text
FROM inbox_dedupe
WHERE dedupe_key = ANY($1::text[])
