-- Collect mode of conversation threads (threads.collect_ms): turns that
-- arrive close together before a run starts are stored one by one, each as
-- a user message of kind 'collect' naming the run they will form, and that
-- run waits in the new state 'collecting' until its window closes (then
-- 'accepted', as every run handed to its butler). A node that goes down
-- with a window open finds the run and all its turns here when it starts.
ALTER TABLE thread_runs DROP CONSTRAINT thread_runs_state_check;
ALTER TABLE thread_runs ADD CONSTRAINT thread_runs_state_check
  CHECK (state IN ('collecting', 'queued', 'accepted', 'running', 'ok',
                   'error', 'cancelled'));

DROP INDEX thread_runs_open;
CREATE INDEX thread_runs_open ON thread_runs (thread_id)
  WHERE state IN ('collecting', 'queued', 'accepted', 'running');
