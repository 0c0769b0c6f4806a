-- GET /v1/threads: one page of threads, newest first by the time of their
-- last message, after the key ($2 last_message_at as Unix µs, $3
-- thread_id; '' = from the newest), at most $1 rows. Each row:
-- (thread_id, last_message_at µs, first user text, last message text,
-- latest run state, its error_class, its error_message, last cursor); the
-- texts are cut to 512 characters here and to their title and preview by
-- runtime/thread_list.cpp. The latest run is the newest that is not queued
-- (a queued run waits behind one that is more telling).
SELECT t.thread_id,
       ((extract(epoch FROM t.last_message_at) * 1000000))::bigint,
       f.body, l.body, r.state, r.error_class, r.error_message, l.cursor
FROM threads t
LEFT JOIN LATERAL (
  SELECT left(body, 512) AS body FROM thread_transcript
  WHERE thread_id = t.thread_id AND role = 'user'
  ORDER BY cursor LIMIT 1) f ON true
LEFT JOIN LATERAL (
  SELECT left(body, 512) AS body, cursor FROM thread_transcript
  WHERE thread_id = t.thread_id
  ORDER BY cursor DESC LIMIT 1) l ON true
LEFT JOIN LATERAL (
  SELECT state, error_class, left(error_message, 512) AS error_message
  FROM thread_runs
  WHERE thread_id = t.thread_id
  ORDER BY state = 'queued', created_at DESC, run_id DESC LIMIT 1) r ON true
WHERE (t.last_message_at, t.thread_id)
      < (COALESCE('epoch'::timestamptz
                  + NULLIF($2, '')::bigint * interval '1 microsecond',
                  'infinity'::timestamptz), $3)
ORDER BY t.last_message_at DESC, t.thread_id DESC
LIMIT $1::integer
