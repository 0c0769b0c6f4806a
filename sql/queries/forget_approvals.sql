-- forget (runtime/forget.md): approval questions of the requests' runs
-- and work items (their summaries). $1 uuid[] request ids, $2 uuid[] work
-- ids. Returns the rows erased.
WITH d AS (DELETE FROM approvals
           WHERE work_id = ANY($2::uuid[]::text[])
              OR run_id = ANY($1::uuid[]::text[])
              OR run_id = ANY($2::uuid[]::text[])
           RETURNING 1)
SELECT count(*) FROM d
