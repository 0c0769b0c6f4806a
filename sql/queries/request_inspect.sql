-- GET /v1/requests/{id}: what was received, how it was decomposed, where
-- each part went and what came of it (with the model, tokens and cost of
-- each work item and their total), as one JSON document (no row when the
-- request is unknown). $1 request_id.
SELECT jsonb_build_object(
  'request_id', m.request_id,
  'lifecycle_state', m.lifecycle_state,
  'error_class', m.error_class,
  'error_message', m.error_message,
  'received_at', m.received_at,
  'completed_at', m.completed_at,
  'attempts', m.attempts,
  'request_context', jsonb_build_object(
    'source_channel', m.source_channel,
    'source_endpoint_identity', m.source_endpoint_identity,
    'source_sender_identity', m.source_sender_identity,
    'source_thread_identity', m.source_thread_identity,
    'trace_parent', m.trace_parent,
    'trace_state', m.trace_state),
  'policy_tier', m.policy_tier,
  'normalized_text', m.normalized_text,
  -- The plan as stored with it (rows planned before the plan was kept
  -- only there have it in message_inbox.decomposition).
  'decomposition', coalesce((SELECT p.plan FROM fanout_plans p
                             WHERE p.request_id = m.request_id),
                            m.decomposition),
  'plan', (SELECT jsonb_build_object(
             'router', p.router, 'fallback', p.fallback,
             'fallback_reason', p.fallback_reason,
             'confidence', p.confidence, 'fanout_mode', p.fanout_mode,
             'join_policy', p.join_policy, 'abort_policy', p.abort_policy)
           FROM fanout_plans p WHERE p.request_id = m.request_id),
  'subrequests', coalesce((
    SELECT jsonb_agg(jsonb_build_object(
             'segment_id', l.segment_id, 'butler', l.butler,
             'prompt', l.prompt, 'state', l.state, 'attempts', l.attempts,
             'work_id', l.work_id, 'error_class', l.error_class,
             'error_message', l.error_message,
             'response', l.raw_response,
             -- The usage of the subrequest's current work item.
             'model', w.model,
             'usage', CASE WHEN w.model_calls IS NULL THEN NULL ELSE
               jsonb_build_object(
                 'input_tokens', w.input_tokens,
                 'output_tokens', w.output_tokens,
                 'cache_read_tokens', w.cache_read_tokens,
                 'cache_write_tokens', w.cache_write_tokens,
                 'cost_usd', w.cost_usd, 'model_calls', w.model_calls) END)
             ORDER BY l.ordinal)
    FROM fanout_execution_log l
    LEFT JOIN route_work w ON w.request_id = l.request_id
                          AND w.work_id::text = l.work_id
    WHERE l.request_id = m.request_id), '[]'),
  'work_items', coalesce((
    SELECT jsonb_agg(jsonb_build_object(
             'work_id', w.work_id, 'butler', w.butler,
             'segment_id', w.segment_id, 'state', w.state,
             'attempts', w.attempts, 'error_class', w.error_class,
             'created_at', w.created_at, 'finished_at', w.finished_at,
             'model', w.model, 'prompt_version', w.prompt_version,
             'usage', CASE WHEN w.model_calls IS NULL THEN NULL ELSE
               jsonb_build_object(
                 'input_tokens', w.input_tokens,
                 'output_tokens', w.output_tokens,
                 'cache_read_tokens', w.cache_read_tokens,
                 'cache_write_tokens', w.cache_write_tokens,
                 'cost_usd', w.cost_usd, 'model_calls', w.model_calls) END)
             ORDER BY w.created_at)
    FROM route_work w WHERE w.request_id = m.request_id), '[]'),
  -- Every work item's usage added up (zeros when none reported any).
  'usage', (SELECT jsonb_build_object(
              'input_tokens', coalesce(sum(w.input_tokens), 0),
              'output_tokens', coalesce(sum(w.output_tokens), 0),
              'cache_read_tokens', coalesce(sum(w.cache_read_tokens), 0),
              'cache_write_tokens', coalesce(sum(w.cache_write_tokens), 0),
              'total_tokens', coalesce(sum(coalesce(w.input_tokens, 0)
                                           + coalesce(w.output_tokens, 0)
                                           + coalesce(w.cache_read_tokens, 0)
                                           + coalesce(w.cache_write_tokens,
                                                      0)), 0),
              'cost_usd', sum(w.cost_usd),
              'model_calls', coalesce(sum(w.model_calls), 0),
              'models', coalesce(jsonb_agg(DISTINCT w.model)
                                   FILTER (WHERE w.model IS NOT NULL), '[]'))
            FROM route_work w WHERE w.request_id = m.request_id),
  'transitions', coalesce((
    SELECT jsonb_agg(jsonb_build_object(
             'from', t.from_state, 'to', t.to_state, 'by', t.lease_owner,
             'at', t.at) ORDER BY t.id)
    FROM inbox_transitions t WHERE t.request_id = m.request_id), '[]'),
  'dead_letters', coalesce((
    SELECT jsonb_agg(jsonb_build_object(
             'segment_id', d.segment_id, 'butler', d.butler,
             'error_class', d.error_class, 'error_message', d.error_message,
             'attempts', d.attempts, 'created_at', d.created_at,
             'replayed_at', d.replayed_at, 'replay_count', d.replay_count))
    FROM dead_letters d WHERE d.request_id = m.request_id), '[]'),
  'tool_calls', coalesce((
    SELECT jsonb_agg(jsonb_build_object(
             'work_id', c.work_id, 'butler', c.butler, 'tool', c.tool,
             'outcome', c.outcome, 'duration_ms', c.duration_ms,
             'arguments', c.arguments, 'at', c.created_at) ORDER BY c.id)
    FROM tool_calls c WHERE c.request_id = m.request_id), '[]'),
  'operator_actions', coalesce((
    SELECT jsonb_agg(jsonb_build_object(
             'at', a.at, 'who', a.who, 'action', a.action,
             'segment_id', a.segment_id, 'why', a.why, 'result', a.result)
             ORDER BY a.id)
    FROM operator_audit a WHERE a.request_id = m.request_id), '[]'),
  'dispatch_outcomes', m.dispatch_outcomes,
  'response_summary', m.response_summary
)::text
FROM message_inbox m
WHERE m.request_id = $1::uuid
