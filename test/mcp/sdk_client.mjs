// The official MCP TypeScript SDK's client against a real node: the command
// of a butler session (runtime family opencode: the prompt on stdin, the
// answer as plain text on stdout) in test/integration/mcp_sdk_pgtest.cpp.
// It connects over Streamable HTTP with the session's BUTLERS_MCP_URL and
// BUTLERS_MCP_TOKEN, offering MCP_SDK_PROTOCOL at initialize, lists the
// tools, pings, calls each of the eleven tools and a few that must fail, and
// ends the MCP session with DELETE. The SDK validates every result against
// its own schemas (and structuredContent against the tool's outputSchema);
// this script checks the values on top.
//
// Environment:
//   BUTLERS_MCP_URL, BUTLERS_MCP_TOKEN  from the session
//   MCP_SDK_PROTOCOL  the protocol version to negotiate. The SDK always
//                     offers its newest; the fetch below rewrites
//                     initialize's params.protocolVersion to this one
//   MCP_SDK_SUMMARY   where to write the JSON summary (via rename)
//   MCP_SDK_PEER      the butler route_to hands work to
//
// Exit 0 when every check held (stdout: one line saying so), else 1 with
// the failures on stderr; the summary is written either way.

import { readFileSync, renameSync, writeFileSync } from 'node:fs';
import { isDeepStrictEqual } from 'node:util';

const url = process.env.BUTLERS_MCP_URL ?? '';
const token = process.env.BUTLERS_MCP_TOKEN ?? '';
const offer = process.env.MCP_SDK_PROTOCOL ?? '';
const summaryPath = process.env.MCP_SDK_SUMMARY ?? '';
const peer = process.env.MCP_SDK_PEER ?? 'peer';

const expectedTools = ['notify', 'state_get', 'state_put', 'state_list',
  'state_delete', 'remind', 'remind_cancel', 'remind_list', 'route_to',
  'recall', 'approval_prompt'];
const readOnly = ['state_get', 'state_list', 'remind_list', 'recall'];

const summary = {
  ok: false,
  sdk_version: null,
  offered: offer,
  negotiated: null,
  server: null,
  tools: [],
  calls: {},
  checks: 0,
  failures: [],
  http: [],
  transport_errors: [],
  client_errors: [],
};

function check(cond, what) {
  summary.checks++;
  if (!cond)
    summary.failures.push(what);
  return cond;
}

function writeSummary() {
  summary.ok = summary.failures.length === 0
    && summary.transport_errors.length === 0
    && summary.client_errors.length === 0;
  if (!summaryPath)
    return;
  writeFileSync(summaryPath + '.tmp', JSON.stringify(summary, null, 1));
  renameSync(summaryPath + '.tmp', summaryPath);
}

function finish() {
  writeSummary();
  if (summary.ok) {
    console.log(`MCP SDK ${summary.sdk_version} conformance passed with `
      + `protocol ${summary.negotiated}: ${summary.checks} checks`);
    process.exit(0);
  }
  console.error('MCP SDK conformance failed:\n'
    + [...summary.failures, ...summary.transport_errors,
      ...summary.client_errors].join('\n'));
  process.exit(1);
}

// A limit on the whole run, so a hang shows as a failure with what was
// seen so far rather than as the session's timeout.
const limit = setTimeout(() => {
  summary.failures.push('the run did not finish within 40 s');
  finish();
}, 40000);

// The JSON-RPC method of a request body, or "response" / undefined.
function rpcOf(body) {
  if (typeof body !== 'string')
    return undefined;
  try {
    const msg = JSON.parse(body);
    return msg.method ?? (('result' in msg || 'error' in msg) ? 'response'
      : undefined);
  } catch {
    return 'not JSON';
  }
}

// Resolved once the GET the SDK makes after notifications/initialized (to
// open the server's event stream) is answered.
let sseAnswered;
const sseGet = new Promise(resolve => { sseAnswered = resolve; });

// The fetch the transport uses: offers `offer` at initialize and records
// every exchange's method, status, content type and MCP headers.
async function recordingFetch(input, init = {}) {
  let body = init.body;
  if (typeof body === 'string') {
    const msg = JSON.parse(body);
    if (msg.method === 'initialize') {
      msg.params.protocolVersion = offer;
      body = JSON.stringify(msg);
    }
  }
  const headers = new Headers(init.headers);
  const method = init.method ?? 'GET';
  const response = await fetch(input, { ...init, body });
  summary.http.push({
    method,
    rpc: rpcOf(body),
    status: response.status,
    content_type: response.headers.get('content-type'),
    protocol_header: headers.get('mcp-protocol-version'),
    session_header: headers.has('mcp-session-id'),
    accept: headers.get('accept'),
  });
  if (method === 'GET')
    sseAnswered(response.status);
  return response;
}

// Awaits `promise` for at most `ms`; `fallback` after that.
function within(promise, ms, fallback) {
  let timer;
  const late = new Promise(resolve => {
    timer = setTimeout(() => resolve(fallback), ms);
  });
  return Promise.race([promise, late]).finally(() => clearTimeout(timer));
}

async function readStdin() {
  let text = '';
  for await (const chunk of process.stdin)
    text += chunk;
  return text;
}

// callTool that records the structured result of an ok call under
// `label`; a throw is a failure.
async function call(client, label, name, args, options) {
  try {
    const r = await client.callTool({ name, arguments: args }, undefined,
      options);
    summary.calls[label] = r.structuredContent ?? null;
    if (!check(r.isError === false, `${label}: isError is ${r.isError}: `
      + JSON.stringify(r.content)))
      return null;
    check(Array.isArray(r.content) && r.content[0]?.type === 'text',
      `${label}: no text content`);
    check(typeof r.structuredContent === 'object',
      `${label}: no structuredContent`);
    return r.structuredContent ?? {};
  } catch (e) {
    check(false, `${label}: ${e.message}`);
    return null;
  }
}

async function listTools(client) {
  const list = await client.listTools();
  summary.tools = list.tools.map(t => t.name);
  check(isDeepStrictEqual(summary.tools, expectedTools),
    `tools/list: ${JSON.stringify(summary.tools)}`);
  for (const t of list.tools) {
    check(t.inputSchema?.type === 'object', `${t.name}: inputSchema`);
    check(t.outputSchema?.type === 'object', `${t.name}: outputSchema`);
    check(typeof t.description === 'string' && t.description.length > 0,
      `${t.name}: description`);
    check(t.annotations?.readOnlyHint === readOnly.includes(t.name),
      `${t.name}: readOnlyHint ${t.annotations?.readOnlyHint}`);
    // The SDK compiled a validator from each outputSchema (ajv), which
    // callTool applies.
    check(client.getToolOutputValidator(t.name) !== undefined,
      `${t.name}: the SDK has no output validator`);
  }
}

async function stateTools(client) {
  const key = `sdk:${offer}`;
  const value = { dose: 2, words: ['blue', 'pill'], when: null };
  const put = await call(client, 'state_put', 'state_put', { key, value });
  check(put?.key === key && put?.version === 1,
    `state_put: ${JSON.stringify(put)}`);
  // Kept, for the test to find in butler_state.
  await call(client, 'state_put_kept', 'state_put',
    { key: `kept:${offer}`, value: 'stays' });
  // With a progress token the answer is an event stream: the progress
  // notification, then the result.
  const progress = [];
  const got = await call(client, 'state_get', 'state_get', { key },
    { onprogress: p => progress.push(p) });
  check(got?.found === true && got?.version === 1
    && isDeepStrictEqual(got?.value, value),
    `state_get: ${JSON.stringify(got)}`);
  check(progress.length === 1 && progress[0].progress === 1,
    `state_get: progress ${JSON.stringify(progress)}`);
  const list = await call(client, 'state_list', 'state_list',
    { prefix: 'sdk:' });
  check(list?.items?.length === 1 && list.items[0].key === key
    && list.items[0].version === 1 && list?.next_cursor === '',
    `state_list: ${JSON.stringify(list)}`);
  const del = await call(client, 'state_delete', 'state_delete',
    { key, expected_version: 1 });
  check(del?.deleted === true, `state_delete: ${JSON.stringify(del)}`);
  const gone = await call(client, 'state_get_deleted', 'state_get', { key });
  check(gone?.found === false, `state_get after delete: `
    + JSON.stringify(gone));
}

async function remindTools(client) {
  const set = await call(client, 'remind', 'remind',
    { after_s: 3600, message: `sdk ${offer} reminder` });
  const id = set?.reminder_id;
  check(typeof id === 'string' && id.length === 36
    && !Number.isNaN(Date.parse(set?.due_at)),
  `remind: ${JSON.stringify(set)}`);
  const listed = await call(client, 'remind_list', 'remind_list', {});
  check(listed?.reminders?.some(r => r.reminder_id === id
    && r.message === `sdk ${offer} reminder`),
  `remind_list: ${JSON.stringify(listed)}`);
  const cancel = await call(client, 'remind_cancel', 'remind_cancel',
    { reminder_id: id });
  check(cancel?.reminder_id === id && cancel?.cancelled === true,
    `remind_cancel: ${JSON.stringify(cancel)}`);
  const after = await call(client, 'remind_list_cancelled', 'remind_list',
    {});
  check(Array.isArray(after?.reminders)
    && !after.reminders.some(r => r.reminder_id === id),
  `remind_list after cancel: ${JSON.stringify(after)}`);
}

async function otherTools(client) {
  const note = await call(client, 'notify', 'notify',
    { message: `sdk ${offer} notify` });
  check(['delivered', 'queued'].includes(note?.status)
    && note?.sequence === 0 && typeof note?.delivery_id === 'string',
  `notify: ${JSON.stringify(note)}`);
  const routed = await call(client, 'route_to', 'route_to',
    { butler: peer, prompt: `sdk ${offer} hand-off` });
  check(routed?.butler === peer && routed?.status === 'accepted'
    && typeof routed?.work_id === 'string',
  `route_to: ${JSON.stringify(routed)}`);
  const recall = await call(client, 'recall', 'recall', {});
  check(recall?.request?.butler === 'sdk'
    && recall?.request?.channel === 'api'
    && recall?.request?.prompt?.includes('conformance')
    && Array.isArray(recall?.messages),
  `recall: ${JSON.stringify(recall)}`);
  // Claude Code's permission prompt: the SDK's butler has the default
  // policy (deny), so the answer is deny, at once, in Claude Code's shape.
  const perm = await call(client, 'approval_prompt', 'approval_prompt',
    { tool_name: 'Bash', input: { command: 'ls' }, tool_use_id: 'toolu_1' });
  check(perm?.behavior === 'deny' && typeof perm?.message === 'string',
    `approval_prompt: ${JSON.stringify(perm)}`);
}

// Calls that fail: a tool error (isError, no structuredContent, so the
// SDK does not hold it against the output schema) and protocol errors.
async function failingCalls(client, McpError) {
  try {
    const bad = await client.callTool({ name: 'state_put',
      arguments: { key: 7 } });
    const text = bad.content?.[0]?.text ?? '';
    summary.calls.bad_arguments = { isError: bad.isError, text };
    check(bad.isError === true && bad.structuredContent === undefined
      && text.includes('value') && text.includes('/key'),
    `bad arguments: ${JSON.stringify(bad)}`);
  } catch (e) {
    check(false, `bad arguments threw: ${e.message}`);
  }
  // No such tool: a JSON-RPC error, not a result.
  try {
    await client.callTool({ name: 'teleport', arguments: {} });
    check(false, 'unknown tool: no error');
  } catch (e) {
    summary.calls.unknown_tool = { code: e.code, message: e.message };
    check(e instanceof McpError && e.code === -32602
      && e.message.includes('teleport'),
    `unknown tool: ${e.constructor.name} ${e.code} ${e.message}`);
  }
  // A method the server does not serve (it declares no resources).
  try {
    await client.listResources();
    check(false, 'resources/list: no error');
  } catch (e) {
    check(e instanceof McpError && e.code === -32601,
      `resources/list: ${e.code} ${e.message}`);
  }
}

// The negotiated version and the headers of every exchange.
async function checkHeaders(transport) {
  check(transport.protocolVersion === offer,
    `negotiated ${transport.protocolVersion}, offered ${offer}`);
  const init = summary.http[0];
  check(init?.rpc === 'initialize' && init.status === 200
    && init.content_type?.startsWith('application/json')
    && init.protocol_header === null && !init.session_header,
  `initialize exchange: ${JSON.stringify(init)}`);
  for (const x of summary.http.slice(1))
    check(x.protocol_header === offer && x.session_header,
      `${x.method} ${x.rpc}: MCP-Protocol-Version ${x.protocol_header}, `
      + `Mcp-Session-Id ${x.session_header ? 'sent' : 'missing'}`);
  // The server opens no stream of its own: 405 to the SDK's GET.
  check(await within(sseGet, 10000, 'no GET') === 405,
    'the GET for an event stream was not answered 405');
  const notes = summary.http.filter(x => x.rpc?.startsWith('notifications/'));
  check(notes.length > 0 && notes.every(x => x.status === 202),
    `notifications: ${JSON.stringify(notes)}`);
}

async function run() {
  let sdk;
  try {
    sdk = {
      ...await import('@modelcontextprotocol/sdk/client/index.js'),
      ...await import('@modelcontextprotocol/sdk/client/streamableHttp.js'),
      ...await import('@modelcontextprotocol/sdk/types.js'),
    };
    summary.sdk_version = JSON.parse(readFileSync(new URL(
      './node_modules/@modelcontextprotocol/sdk/package.json',
      import.meta.url))).version;
  } catch (e) {
    check(false, `cannot load the MCP SDK: ${e.message}`);
    return;
  }
  const prompt = await readStdin();
  check(prompt.includes('conformance'), 'the prompt did not arrive on stdin');
  if (!check(url !== '' && token.startsWith('bt_'),
    'no BUTLERS_MCP_URL / BUTLERS_MCP_TOKEN'))
    return;
  const transport = new sdk.StreamableHTTPClientTransport(new URL(url), {
    fetch: recordingFetch,
    requestInit: { headers: { Authorization: `Bearer ${token}` } },
  });
  transport.onerror = e => summary.transport_errors.push(
    `transport: ${e.message}`);
  const client = new sdk.Client({ name: 'butlers-sdk-conformance',
    version: '1.0.0' });
  client.onerror = e => summary.client_errors.push(`client: ${e.message}`);
  await client.connect(transport);
  summary.negotiated = transport.protocolVersion;
  summary.server = client.getServerVersion() ?? null;
  check(summary.server?.name === 'butlers', 'serverInfo.name');
  check(client.getServerCapabilities()?.tools !== undefined,
    'no tools capability');
  check(typeof client.getInstructions() === 'string', 'no instructions');
  check(isDeepStrictEqual(await client.ping(), {}), 'ping');
  await listTools(client);
  await otherTools(client);
  await stateTools(client);
  await remindTools(client);
  await failingCalls(client, sdk.McpError);
  await checkHeaders(transport);
  // DELETE ends the MCP session; a request after it is refused (404).
  const sessionId = transport.sessionId;
  await transport.terminateSession();
  check(summary.http.at(-1)?.method === 'DELETE'
    && summary.http.at(-1)?.status === 204,
  `DELETE: ${JSON.stringify(summary.http.at(-1))}`);
  transport.onerror = undefined;
  const ended = new sdk.StreamableHTTPClientTransport(new URL(url), {
    fetch: recordingFetch,
    requestInit: { headers: { Authorization: `Bearer ${token}` } },
    sessionId,
  });
  await client.close();
  await probeEndedSession(sdk, ended);
}

// A ping on the ended session: 404, which the SDK reports as such.
async function probeEndedSession(sdk, transport) {
  const client = new sdk.Client({ name: 'ended', version: '1.0.0' });
  try {
    await client.connect(transport);
    await client.ping();
    check(false, 'ping on an ended session: no error');
  } catch (e) {
    check(e.code === 404, `ping on an ended session: ${e.code} ${e.message}`);
  }
  await client.close();
}

try {
  await run();
} catch (e) {
  check(false, `unexpected: ${e.stack ?? e}`);
}
clearTimeout(limit);
finish();
