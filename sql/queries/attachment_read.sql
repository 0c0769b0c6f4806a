-- An attachment's bytes for a session (actors/session.cpp), base64 without
-- line breaks, since named results travel as text. $1: sha256 (hex).
SELECT media_type, size_bytes::text,
       translate(encode(data, 'base64'), E'\n', '')
FROM attachments
WHERE sha256 = $1
