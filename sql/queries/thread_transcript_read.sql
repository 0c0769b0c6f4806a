-- Gap backfill: a thread's transcript after cursor $2, oldest first, at
-- most $3 rows, as one JSON document {"thread_id","messages":[...],
-- "next_cursor"}. $1 thread_id.
WITH rows AS (
  SELECT cursor, message_id, role, kind, run_id, butler, body, detail,
         created_at
  FROM thread_transcript
  WHERE thread_id = $1 AND cursor > $2::bigint
  ORDER BY cursor
  LIMIT $3::integer
)
SELECT json_build_object(
  'thread_id', $1::text,
  'messages', COALESCE((SELECT json_agg(json_build_object(
      'cursor', cursor, 'message_id', message_id, 'role', role,
      'kind', kind, 'run_id', run_id, 'butler', butler, 'body', body,
      'detail', detail,
      'created_at_unix_ms', (extract(epoch FROM created_at) * 1000)::bigint)
    ORDER BY cursor) FROM rows), '[]'::json),
  'next_cursor', COALESCE((SELECT max(cursor) FROM rows), $2::bigint))::text
