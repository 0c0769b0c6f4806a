-- forget: marks requests ($1 uuid[]) as forgotten before anything of them
-- is erased, so a reply still owed is not sent (outbound_ledger_begin).
INSERT INTO forget_tombstones (request_id)
SELECT unnest($1::uuid[])
ON CONFLICT (request_id) DO NOTHING
