-- The approval request whose question went out as one of the given
-- messages (a mail's In-Reply-To and References). $1 notice refs
-- ("email:<Message-ID>") separated by line feeds. Returns approval_id and
-- the columns of approval_get, the newest question first; or no row.
SELECT approval_id::text, run_id, butler, tool, summary, status,
       (extract(epoch FROM expires_at) * 1000)::bigint,
       requester_channel, requester_endpoint, requester_sender,
       requester_thread, coalesce(answered_by, ''), notice_ref, answer_key
FROM approvals
WHERE notice_ref <> ''
  AND notice_ref = ANY (string_to_array($1::text, E'\n'))
ORDER BY created_at DESC
LIMIT 1
