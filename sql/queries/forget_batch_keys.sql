-- forget: what else one batch of the sender's requests ($1 uuid[]) names:
-- ('work', work_id) of their work items, ('thread', thread_id) of their
-- thread runs, ('sha256', hash) of every attachment their messages and
-- envelopes mention (any 64-hex string that is a stored attachment).
SELECT 'work', work_id::text FROM route_work WHERE request_id = ANY($1::uuid[])
UNION
SELECT 'thread', thread_id FROM thread_runs WHERE run_id = ANY($1::uuid[])
UNION
SELECT 'sha256', h.sha FROM (
  SELECT (regexp_matches(m.raw_payload, '[0-9a-f]{64}', 'g'))[1] AS sha
  FROM message_inbox m WHERE m.request_id = ANY($1::uuid[])
  UNION
  SELECT (regexp_matches(w.envelope::text, '[0-9a-f]{64}', 'g'))[1]
  FROM route_work w WHERE w.request_id = ANY($1::uuid[])
) h
WHERE EXISTS (SELECT 1 FROM attachments a WHERE a.sha256 = h.sha)
