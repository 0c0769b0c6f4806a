-- forget: tombstones older than 30 days go (no delivery waits that long).
DELETE FROM forget_tombstones WHERE forgotten_at < now() - interval '30 days'
