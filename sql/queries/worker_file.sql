-- A file of a work item for its external worker (actors/README.md
-- "Writing a butler in any language"): the bytes of attachment $3 when
-- work item $2 of butler $1 is running (handed to a worker) and its
-- route.v1 names the file; no row otherwise. Base64 without line breaks,
-- since named results travel as text. Returns (media_type, size, base64).
SELECT a.media_type, a.size_bytes::text,
       translate(encode(a.data, 'base64'), E'\n', '')
FROM route_work w
JOIN attachments a ON a.sha256 = $3
WHERE w.work_id = $2::uuid AND w.butler = $1 AND w.state = 'running'
  AND (w.envelope::jsonb -> 'input' -> 'context' -> 'attachments')
      @> jsonb_build_array(jsonb_build_object('sha256', $3::text))
