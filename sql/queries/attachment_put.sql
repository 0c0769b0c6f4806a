-- Stores an attachment's bytes once (runtime/attachment_store.cpp); storing
-- them again only renews their retention. On the store's own connection,
-- never in the inbox writer's group commit.
-- $1: sha256 (hex), $2: media type, $3: size in bytes, $4: the bytes.
INSERT INTO attachments (sha256, media_type, size_bytes, data)
VALUES ($1, $2, $3, $4)
ON CONFLICT (sha256) DO UPDATE SET created_at = now()
