-- The files of the turn that started or queued a thread run
-- (runtime/attachments.md): their references as `attachments_json`
-- renders them (hash, media type, size, name); NULL for none. Stored with
-- the run, so a queued run, and a run resumed after its node went down,
-- still give them to the model.
ALTER TABLE thread_runs ADD COLUMN attachments jsonb;
