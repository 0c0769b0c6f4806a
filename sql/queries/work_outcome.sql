-- A work item's state and lease token, read back when the commit of its
-- result was in doubt (the connection broke, the server failed over): a
-- terminal state under the writer's lease token means the result is
-- durable. $1 work_id. Returns state, lease_token; or no row.
SELECT state, lease_token::text FROM route_work WHERE work_id = $1::uuid
