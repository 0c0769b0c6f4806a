-- Stores a connector's checkpoint (sql/0007). $1 connector, $2 key,
-- $3 value. Returns the stored value.
INSERT INTO connector_checkpoints (connector, key, value)
VALUES ($1, $2, $3)
ON CONFLICT (connector, key)
  DO UPDATE SET value = EXCLUDED.value, updated_at = now()
RETURNING value
