-- What a session's budgets have been spent on before it starts
-- (runtime/budget.hpp): the request's policy tier ('default' when it has
-- no inbox row, e.g. a schedule's), the tokens and cost of the request's
-- finished work items (every segment and attempt), and those of the
-- (sender, butler) on the current UTC day. One row.
-- $1 request_id, $2 sender, $3 butler.
SELECT coalesce((SELECT m.policy_tier FROM message_inbox m
                 WHERE m.request_id = $1::uuid LIMIT 1), 'default'),
       coalesce((SELECT sum(coalesce(w.input_tokens, 0)
                            + coalesce(w.output_tokens, 0)
                            + coalesce(w.cache_read_tokens, 0)
                            + coalesce(w.cache_write_tokens, 0))
                 FROM route_work w WHERE w.request_id = $1::uuid), 0)::text,
       coalesce((SELECT sum(w.cost_usd) FROM route_work w
                 WHERE w.request_id = $1::uuid), 0)::text,
       coalesce((SELECT u.input_tokens + u.output_tokens + u.cache_read_tokens
                        + u.cache_write_tokens
                 FROM usage_daily u
                 WHERE u.sender = $2 AND u.butler = $3
                   AND u.day = (now() AT TIME ZONE 'UTC')::date), 0)::text,
       coalesce((SELECT u.cost_usd FROM usage_daily u
                 WHERE u.sender = $2 AND u.butler = $3
                   AND u.day = (now() AT TIME ZONE 'UTC')::date), 0)::text
