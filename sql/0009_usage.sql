-- Tokens, cost, model and prompt version (spec 001 §15.7, §15.10; issue
-- 25): what each work item's session reported, written with its terminal
-- state by the same statement (sql/queries/work_finish_usage.sql). NULL
-- where nothing was reported (deliveries, a scripted runtime without
-- synthetic usage, sessions that never finished). Nullable columns without
-- defaults: adding them rewrites nothing.
ALTER TABLE route_work
  ADD COLUMN model              text,
  ADD COLUMN prompt_version     text,
  ADD COLUMN input_tokens       bigint,
  ADD COLUMN output_tokens      bigint,
  ADD COLUMN cache_read_tokens  bigint,
  ADD COLUMN cache_write_tokens bigint,
  -- US dollars, NULL when the runtime reported no cost.
  ADD COLUMN cost_usd           double precision,
  -- Model calls (HTTP requests, CLI turns) the session made.
  ADD COLUMN model_calls        integer;

-- Usage per (sender, butler, UTC day), for the daily budgets and for
-- operators: upserted by the statement that finishes the work items
-- (sql/queries/work_finish_usage.sql), so it never disagrees with
-- route_work. `sender` is the request's source_sender_identity (a
-- schedule's is "BUTLER/SCHEDULE").
CREATE TABLE usage_daily (
  sender             text             NOT NULL,
  butler             text             NOT NULL,
  day                date             NOT NULL,
  input_tokens       bigint           NOT NULL DEFAULT 0,
  output_tokens      bigint           NOT NULL DEFAULT 0,
  cache_read_tokens  bigint           NOT NULL DEFAULT 0,
  cache_write_tokens bigint           NOT NULL DEFAULT 0,
  cost_usd           double precision NOT NULL DEFAULT 0,
  model_calls        bigint           NOT NULL DEFAULT 0,
  sessions           bigint           NOT NULL DEFAULT 0,
  PRIMARY KEY (sender, butler, day)
);
