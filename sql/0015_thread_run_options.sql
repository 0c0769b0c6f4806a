-- What the turn that started (or queued, or opened the collect window of)
-- a thread run asked of it: who sent it, the model its session uses instead
-- of the butler's, and the most steps (model calls, scripted turns) it may
-- take. NULL when the turn left them to the butler. Stored with the run,
-- so a run resumed after its node went down keeps them.
ALTER TABLE thread_runs ADD COLUMN sender text;
ALTER TABLE thread_runs ADD COLUMN model text;
ALTER TABLE thread_runs ADD COLUMN max_steps integer
  CHECK (max_steps IS NULL OR max_steps BETWEEN 1 AND 1000);
