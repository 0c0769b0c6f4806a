-- A connector's checkpoint (sql/0007). $1 connector, $2 key. One row
-- (value) when one is stored, none otherwise.
SELECT value FROM connector_checkpoints WHERE connector = $1 AND key = $2
