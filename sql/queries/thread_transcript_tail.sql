-- The latest $2 messages of thread $1, oldest first, as one JSON array
-- (tool recall).
SELECT COALESCE(json_agg(json_build_object(
         'cursor', cursor, 'role', role, 'kind', kind, 'butler', butler,
         'body', body,
         'created_at_unix_ms', (extract(epoch FROM created_at) * 1000)::bigint)
         ORDER BY cursor), '[]'::json)::text
FROM (
  SELECT cursor, role, kind, butler, body, created_at
  FROM thread_transcript
  WHERE thread_id = $1::text
  ORDER BY cursor DESC
  LIMIT $2::integer
) t
