-- work_finish for items whose session reported usage or ran under a
-- prompt version (sql/0009_usage.sql): the terminal state, the usage and
-- the prompt version, and the (sender, butler, UTC day) totals, in one
-- statement, fenced as work_finish is (a holder whose lease passed on
-- writes nothing, so counts nothing). Items of a batch that share a day
-- key are summed before the upsert (ON CONFLICT may touch a row once).
-- $1 uuid[] work_id, $2 int8[] lease_token, $3 text[] state, $4 text[]
-- response, $5 text[] error class (NULL = none), $6 text[] model (NULL =
-- none), $7 text[] prompt version (NULL = none), $8..$11 int8[] input,
-- output, cache-read and cache-write tokens, $12 text[] cost in US dollars
-- (NULL = unknown), $13 int8[] model calls, $14 text[] sender.
-- Returns the work_id of each finished item.
WITH t AS (
  SELECT * FROM unnest($1::uuid[], $2::int8[], $3::text[], $4::text[],
                       $5::text[], $6::text[], $7::text[], $8::int8[],
                       $9::int8[], $10::int8[], $11::int8[], $12::text[],
                       $13::int8[], $14::text[])
    AS t(work_id, lease_token, state, response, error_class, model,
         prompt_version, input_tokens, output_tokens, cache_read_tokens,
         cache_write_tokens, cost_usd, model_calls, sender)
), done AS (
  UPDATE route_work w
  SET state = t.state,
      finished_at = now(),
      response = t.response::json,
      error_class = t.error_class,
      lease_owner = NULL,
      lease_expires_at = NULL,
      model = t.model,
      prompt_version = t.prompt_version,
      input_tokens = t.input_tokens,
      output_tokens = t.output_tokens,
      cache_read_tokens = t.cache_read_tokens,
      cache_write_tokens = t.cache_write_tokens,
      cost_usd = t.cost_usd::float8,
      model_calls = t.model_calls::int4
  FROM t
  WHERE w.work_id = ANY($1::uuid[])
    AND w.work_id = t.work_id AND w.lease_token = t.lease_token
    AND CASE w.state WHEN 'queued' THEN true WHEN 'running' THEN true
          ELSE false END
  RETURNING w.work_id, w.butler, t.sender, w.finished_at, t.input_tokens,
            t.output_tokens, t.cache_read_tokens, t.cache_write_tokens,
            t.cost_usd::float8 AS cost_usd, t.model_calls
), daily AS (
  INSERT INTO usage_daily AS u (sender, butler, day, input_tokens,
                                output_tokens, cache_read_tokens,
                                cache_write_tokens, cost_usd, model_calls,
                                sessions)
  SELECT d.sender, d.butler, (d.finished_at AT TIME ZONE 'UTC')::date,
         sum(d.input_tokens), sum(d.output_tokens), sum(d.cache_read_tokens),
         sum(d.cache_write_tokens), coalesce(sum(d.cost_usd), 0),
         sum(d.model_calls), count(*)
  FROM done d
  WHERE d.model_calls > 0 OR d.input_tokens + d.output_tokens
                             + d.cache_read_tokens + d.cache_write_tokens > 0
        OR d.cost_usd IS NOT NULL
  GROUP BY 1, 2, 3
  ON CONFLICT (sender, butler, day) DO UPDATE
  SET input_tokens = u.input_tokens + excluded.input_tokens,
      output_tokens = u.output_tokens + excluded.output_tokens,
      cache_read_tokens = u.cache_read_tokens + excluded.cache_read_tokens,
      cache_write_tokens = u.cache_write_tokens + excluded.cache_write_tokens,
      cost_usd = u.cost_usd + excluded.cost_usd,
      model_calls = u.model_calls + excluded.model_calls,
      sessions = u.sessions + excluded.sessions
)
SELECT work_id::text FROM done
