-- forget (runtime/forget.md): attachments ($1 text[] hashes) the sender's
-- messages named that no message or work item left names: content-
-- addressed bytes another person also sent stay. Scans what is left (a
-- forget is rare). Returns the rows erased.
WITH d AS (DELETE FROM attachments a
           WHERE a.sha256 = ANY($1::text[])
             AND NOT EXISTS (SELECT 1 FROM message_inbox m
                             WHERE strpos(m.raw_payload, a.sha256) > 0)
             AND NOT EXISTS (SELECT 1 FROM route_work w
                             WHERE strpos(w.envelope::text, a.sha256) > 0)
           RETURNING 1)
SELECT count(*) FROM d
