-- The retention of attachments: rows last stored more than $1 days ago go,
-- at most $2 per sweep (the store runs it after its writes).
DELETE FROM attachments
WHERE sha256 IN (SELECT sha256 FROM attachments
                 WHERE created_at < now() - make_interval(days => $1::int)
                 ORDER BY created_at
                 LIMIT $2::int)
