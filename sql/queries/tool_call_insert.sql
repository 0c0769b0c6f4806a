-- Records one tool call (actors/tool_server.cpp). $1 request_id, $2
-- work_id, $3 butler, $4 tool, $5 outcome, $6 duration ms, $7 arguments
-- (JSON text, redacted unless configured).
INSERT INTO tool_calls (request_id, work_id, butler, tool, outcome,
                        duration_ms, arguments)
SELECT $1::uuid, $2::uuid, $3::text, $4::text, $5::text,
       $6::double precision, $7::jsonb
-- Nothing of a forgotten request (runtime/forget.md): a run still in
-- flight when its person was forgotten leaves no trace.
WHERE NOT EXISTS (SELECT 1 FROM forget_tombstones WHERE request_id = $1::uuid)
