// The Butlers chat (/chat): talk to the butlers over the node's thread API
// (actors/README.md "Threads"). Threads on the side (GET /v1/threads and the
// summary stream), one conversation at a time: its transcript backfilled
// from GET /v1/threads/{id}/transcript, then live from the thread's event
// stream (answers as they are written, steer, tool calls, approvals). Plain
// JavaScript, no build step, nothing from the network but the node;
// everything shown is built with textContent, never parsed as markup. See
// runtime/dashboard/README.md "Chat".
"use strict";

(function () {
  const TOKEN_KEY = "butlers.token"; // the dashboard's: one sign-in for both
  const SENDER_KEY = "butlers.chat.sender";
  const BUTLER_KEY = "butlers.chat.butler";
  const THREAD_KEY = "butlers.chat.thread";
  // Bounds: what one conversation keeps on the page, the threads listed per
  // page, and the files one message may carry (the node takes bodies up to
  // http.max_body_bytes, 1 MiB by default; base64 adds a third).
  const MAX_MESSAGES = 5000;
  const TRANSCRIPT_PAGE = 500;
  const THREADS_PAGE = 30;
  const MAX_ATTACH_BYTES = 700 * 1024;
  const ACTIVE = new Set(["accepted", "running", "collecting", "queued"]);

  const $ = (id) => document.getElementById(id);
  const els = {
    chat: $("chat"), login: $("login"), list: $("thread-list"), more: $("more-threads"),
    title: $("thread-title"), status: $("run-status"), notices: $("notices"),
    messages: $("messages"), form: $("composer"), text: $("text"), butler: $("butler"),
    files: $("files"), attached: $("attached"), model: $("model"), maxSteps: $("max-steps"),
    send: $("send"), interrupt: $("interrupt"), stop: $("stop"), forget: $("forget"),
    toggle: $("threads-toggle"), newThread: $("new-thread"),
  };

  // -- small helpers ----------------------------------------------------------

  /// An element: `h("li", {class: "x"}, child, ...)`.
  function h(tag, attrs, ...children) {
    const el = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === undefined || v === null || v === false) continue;
      if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
      else if (k === "text") el.textContent = String(v);
      else el.setAttribute(k, v === true ? "" : String(v));
    }
    for (const c of children.flat()) {
      if (c === undefined || c === null || c === false) continue;
      el.append(c instanceof Node ? c : document.createTextNode(String(c)));
    }
    return el;
  }

  function badge(state) {
    const s = state ? String(state) : "idle";
    return h("span", { class: "badge " + s.replace(/[^a-z_-]/gi, "") }, s);
  }

  /// `n` random bytes as hex (crypto.getRandomValues works without TLS too).
  function randomHex(n) {
    const b = new Uint8Array(n);
    crypto.getRandomValues(b);
    return [...b].map((x) => x.toString(16).padStart(2, "0")).join("");
  }

  /// Who this browser is to the node: kept in localStorage so every turn
  /// (and the approvals it answers) carries the same sender.
  function sender() {
    let s = localStorage.getItem(SENDER_KEY);
    if (!s || !/^web:[0-9a-f]{16}$/.test(s)) {
      s = "web:" + randomHex(8);
      localStorage.setItem(SENDER_KEY, s);
    }
    return s;
  }

  function notify(text, kind) {
    const n = h("div", { class: "notice " + (kind || ""), role: "status" }, text,
      " ", h("button", { type: "button", class: "secondary", onclick: () => n.remove() }, "Dismiss"));
    els.notices.replaceChildren(n);
  }

  function timeOf(ms) {
    if (!ms) return "";
    const d = new Date(ms);
    return isNaN(d.getTime()) ? "" : d.toLocaleString();
  }

  // -- the API and its token --------------------------------------------------

  class AuthError extends Error {}

  function headers(extra) {
    const out = Object.assign({ Accept: "application/json" }, extra || {});
    const token = sessionStorage.getItem(TOKEN_KEY);
    if (token) out.Authorization = "Bearer " + token;
    return out;
  }

  /// The parsed JSON of `path`; AuthError on 401, Error with the API's
  /// message (and `status`, `body`) otherwise.
  async function api(path, options) {
    const opts = Object.assign({}, options || {});
    opts.headers = headers(opts.headers);
    const r = await fetch(path, opts);
    const text = await r.text();
    let body = null;
    try { body = text ? JSON.parse(text) : null; } catch (e) { body = null; }
    if (r.status === 401) throw new AuthError("token needed");
    if (!r.ok) {
      const err = new Error((body && body.error && body.error.message) || (body && body.message) || ("HTTP " + r.status));
      err.status = r.status;
      err.body = body;
      throw err;
    }
    return body;
  }

  function post(path, body) {
    return api(path, { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body) });
  }

  /// Reads a server-sent event stream with fetch() (EventSource cannot send
  /// the Authorization header) and hands each event's type, parsed data and
  /// id to `onEvent`.
  async function readEvents(path, signal, onOpen, onEvent) {
    const r = await fetch(path, { headers: headers({ Accept: "text/event-stream" }), signal: signal });
    if (r.status === 401) throw new AuthError("token needed");
    if (!r.ok || !r.body) throw new Error("event stream: HTTP " + r.status);
    await onOpen();
    const reader = r.body.getReader();
    const decoder = new TextDecoder();
    let buf = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      buf += decoder.decode(value, { stream: true });
      let end;
      while ((end = buf.indexOf("\n\n")) >= 0) {
        const frame = buf.slice(0, end);
        buf = buf.slice(end + 2);
        let type = "message";
        let id = "";
        const data = [];
        for (const line of frame.split("\n")) {
          if (line.startsWith("event:")) type = line.slice(6).trim();
          else if (line.startsWith("id:")) id = line.slice(3).trim();
          else if (line.startsWith("data:")) data.push(line.slice(5).replace(/^ /, ""));
        }
        if (!data.length) continue;
        let parsed = null;
        try { parsed = JSON.parse(data.join("\n")); } catch (e) { parsed = null; }
        if (parsed) onEvent(type, parsed, id);
      }
    }
  }

  /// Keeps a stream open: reconnects after a failure (1 s, doubling to
  /// 15 s) until `ctl` is aborted. A refused token asks for one.
  function keepStreaming(path, ctl, onOpen, onEvent) {
    let wait = 1000;
    (async () => {
      while (!ctl.signal.aborted) {
        try {
          await readEvents(path, ctl.signal, async () => { wait = 1000; await onOpen(); }, onEvent);
        } catch (e) {
          if (ctl.signal.aborted) return;
          if (e instanceof AuthError) return signIn("That token was refused.");
        }
        if (ctl.signal.aborted) return;
        await new Promise((res) => setTimeout(res, wait));
        wait = Math.min(wait * 2, 15000);
      }
    })();
  }

  // -- sign in ----------------------------------------------------------------

  let started = false;

  function signIn(message) {
    stopAll();
    started = false;
    sessionStorage.removeItem(TOKEN_KEY);
    els.forget.hidden = true;
    els.chat.hidden = true;
    els.login.hidden = false;
    const input = h("input", { type: "password", id: "token", name: "token", autocomplete: "current-password", "aria-label": "Bearer token", placeholder: "http.token of the node" });
    const form = h("form", {
      id: "token-form",
      onsubmit: (ev) => {
        ev.preventDefault();
        sessionStorage.setItem(TOKEN_KEY, input.value.trim());
        start();
      },
    }, h("label", { for: "token" }, "This node wants its API token (kept in this tab only)."), input, h("button", { type: "submit" }, "Sign in"));
    els.login.replaceChildren(h("h1", {}, "Sign in"), message ? h("div", { class: "notice error", role: "status" }, message) : "", form);
    input.focus();
  }

  // -- the thread list --------------------------------------------------------

  const threads = new Map(); // thread_id -> digest
  let listCursor = null;
  let summaryCtl = null;

  function digestRow(d) {
    const current = conv && conv.id === d.thread_id;
    return h("li", { class: current ? "current" : "", "data-thread": d.thread_id },
      h("button", { type: "button", onclick: () => { openThread(d.thread_id); closeSidebar(); } },
        h("span", { class: "t-title" }, d.title || d.thread_id),
        h("span", { class: "t-preview" }, d.last_message_preview || ""),
        h("span", { class: "t-meta" }, badge(d.run_status), timeOf(d.last_message_at_unix_ms))));
  }

  function drawList() {
    const rows = [...threads.values()].sort((a, b) =>
      (b.last_message_at_unix_ms || 0) - (a.last_message_at_unix_ms || 0) || (a.thread_id < b.thread_id ? -1 : 1));
    els.list.replaceChildren(...rows.map(digestRow));
    els.more.hidden = !listCursor;
  }

  async function loadThreads(more) {
    const q = "/v1/threads?limit=" + THREADS_PAGE + (more && listCursor ? "&cursor=" + encodeURIComponent(listCursor) : "");
    const page = await api(q);
    for (const t of page.threads || []) {
      const had = threads.get(t.thread_id);
      threads.set(t.thread_id, Object.assign({}, had || {}, t));
    }
    listCursor = page.next_cursor || null;
    drawList();
  }

  function onSummary(type, d) {
    if (type !== "summary" || !d.thread_id) return;
    const had = threads.get(d.thread_id) || {};
    // Summary events after a restart leave out what the actor has not seen.
    threads.set(d.thread_id, Object.assign({}, had, d));
    drawList();
    if (conv && conv.id === d.thread_id) {
      if (d.title) els.title.textContent = d.title;
    }
  }

  // -- one conversation -------------------------------------------------------

  /// The open conversation: its id, what is drawn (by transcript cursor,
  /// live answers and approval cards by id), the runs as the stream tells
  /// them, and the stream's controller.
  let conv = null;

  function newConv(id, known) {
    return {
      id: id, known: known, lastCursor: 0, byCursor: new Set(), byMessage: new Map(),
      live: new Map(), finished: new Set(), runs: new Map(), approvals: new Map(), asked: [], ctl: null,
    };
  }

  function atBottom() {
    const m = els.messages;
    return m.scrollHeight - m.scrollTop - m.clientHeight < 40;
  }

  function scrollDown(stick) {
    if (stick) els.messages.scrollTop = els.messages.scrollHeight;
  }

  /// Puts `el` (with data-cursor) among the messages in cursor order.
  function place(el, cursor) {
    const stick = atBottom();
    let before = null;
    for (let n = els.messages.lastElementChild; n; n = n.previousElementSibling) {
      const c = Number(n.dataset.cursor || 0);
      if (c && c <= cursor) break;
      if (c && c > cursor) before = n;
    }
    els.messages.insertBefore(el, before);
    while (els.messages.childElementCount > MAX_MESSAGES) {
      const gone = els.messages.firstElementChild;
      gone.remove();
      conv.byMessage.delete(gone.dataset.message);
      if (gone.dataset.approval) conv.approvals.delete(gone.dataset.approval);
    }
    scrollDown(stick);
  }

  function messageEl(m) {
    const cls = ["msg", m.role === "user" ? "user" : "assistant"];
    if (m.role !== "user" && (m.kind === "error" || m.kind === "cancelled")) cls.push(m.kind);
    const who = m.role === "user" ? "You" : (m.butler || "butler");
    const meta = h("div", { class: "who" }, who,
      m.role === "user" && m.kind === "steer" ? h("span", { class: "steer-state badge pending" }, "steer: waiting") : null,
      m.role === "user" && m.kind === "queued" ? badge("queued") : null,
      m.role !== "user" && m.kind && m.kind !== "reply" && m.kind !== "ok" ? badge(m.kind) : null,
      m.created_at_unix_ms ? h("span", {}, timeOf(m.created_at_unix_ms)) : null);
    return h("li", { class: cls.join(" "), "data-cursor": m.cursor, "data-message": m.message_id || "", "data-run": m.run_id || "", "data-role": m.role },
      meta, h("div", { class: "body" }, m.body || ""));
  }

  /// A transcript message (from the stream or the backfill), once.
  function addMessage(m) {
    if (!conv || !m || !m.cursor || conv.byCursor.has(m.cursor)) return;
    const el = messageEl(m);
    conv.byCursor.add(m.cursor);
    if (m.message_id) conv.byMessage.set(m.message_id, el);
    conv.lastCursor = Math.max(conv.lastCursor, m.cursor);
    if (m.role !== "user" && m.run_id) {
      // The answer is stored: it replaces what streamed, and its run is over.
      conv.finished.add(m.run_id);
      const live = conv.live.get(m.run_id);
      if (live) { live.remove(); conv.live.delete(m.run_id); }
      const r = conv.runs.get(m.run_id);
      if (r && ACTIVE.has(r.state)) {
        r.state = m.kind === "error" || m.kind === "cancelled" ? m.kind : "ok";
        drawRunState();
      }
    }
    place(el, m.cursor);
    // An answer still being written continues below what was just said.
    if (m.role === "user") for (const live of conv.live.values()) els.messages.append(live);
  }

  /// The answer of run `run_id` as it is being written.
  function liveAnswer(runId, butler) {
    let el = conv.live.get(runId);
    if (!el) {
      el = h("li", { class: "msg assistant live", "data-live": runId },
        h("div", { class: "who" }, butler || "butler", badge("running")),
        h("div", { class: "body cursor-blink" }, ""));
      conv.live.set(runId, el);
      const stick = atBottom();
      els.messages.append(el);
      scrollDown(stick);
    }
    return el;
  }

  function onDelta(d) {
    if (!d.run_id || conv.finished.has(d.run_id)) return;
    const el = liveAnswer(d.run_id, d.butler);
    const stick = atBottom();
    el.querySelector(".body").append(d.text || "");
    scrollDown(stick);
  }

  function onRun(d) {
    if (!d.run_id) return;
    conv.runs.set(d.run_id, d);
    if (ACTIVE.has(d.state) && d.state !== "queued" && !conv.finished.has(d.run_id)) liveAnswer(d.run_id, d.butler);
    if (!ACTIVE.has(d.state)) {
      const live = conv.live.get(d.run_id);
      if (live) live.querySelector(".body").classList.remove("cursor-blink");
    }
    drawRunState();
  }

  function steerState(messageId, text, cls) {
    const el = conv.byMessage.get(messageId);
    const s = el && el.querySelector(".steer-state");
    if (s) { s.textContent = text; s.className = "steer-state badge " + cls; }
  }

  function onSteerApplied(d) {
    for (const id of d.message_ids || []) steerState(id, "steer: applied at step " + d.turn, "ok");
    const note = h("li", { class: "event", "data-steer-applied": d.run_id }, "Steer applied at step " + d.turn);
    const stick = atBottom();
    const live = conv.live.get(d.run_id);
    els.messages.insertBefore(note, live || null);
    scrollDown(stick);
  }

  function onTool(d) {
    const stick = atBottom();
    const el = h("li", { class: "event tool" }, "Tool " + (d.tool || "?") + ": " + (d.outcome || ""));
    const live = d.run_id && conv.live.get(d.run_id);
    if (live) els.messages.insertBefore(el, live); else els.messages.append(el);
    scrollDown(stick);
  }

  // -- approvals --------------------------------------------------------------

  const OUTCOME = {
    approved: "Approved: the tool call runs.",
    denied: "Denied: the butler was told no.",
    expired: "Expired without an answer: denied.",
  };

  /// Answers the question of card `card` with the chat's token and sender.
  /// The answer (or, when it was answered elsewhere or expired meanwhile,
  /// what it is now) replaces the card at once; the stream's `approval`
  /// event says the same again.
  async function answerApproval(a, decision, card) {
    const c = conv;
    const show = (status) => { if (conv === c) onApproval(Object.assign({}, a, { status: status })); };
    for (const b of card.querySelectorAll("button")) b.disabled = true;
    card.dataset.answering = decision;
    try {
      const r = await post("/v1/runs/" + encodeURIComponent(a.run_id) + "/approvals/" + encodeURIComponent(a.approval_id),
        { decision: decision, sender: sender() });
      show((r && r.status) || (decision === "approve" ? "approved" : "denied"));
    } catch (e) {
      if (e instanceof AuthError) return signIn("That token was refused.");
      const now = e.status === 409 && /already (approved|denied|expired)/.exec(e.message);
      if (now) return show(now[1]);
      delete card.dataset.answering;
      if (e.status !== 403 && e.status !== 404)
        for (const b of card.querySelectorAll("button")) b.disabled = false;
      const why = card.querySelector(".a-error") || card.appendChild(h("div", { class: "a-error", role: "status" }));
      why.textContent = "Not answered: " + e.message;
    }
  }

  function approvalCard(a) {
    const status = String(a.status || "pending");
    const run = a.run_id && conv.runs.get(a.run_id);
    const who = run && run.butler ? run.butler : "The butler";
    const card = h("li", { class: "approval " + status.replace(/[^a-z]/g, ""), "data-approval": a.approval_id, "data-status": status, "data-run": a.run_id || "" },
      h("div", { class: "a-tool" }, who + (status === "pending" ? " asks to use " : " asked to use ") + (a.tool || "a tool")),
      h("div", { class: "a-summary" }, a.summary || ""));
    if (status === "pending") {
      const expires = a.expires_at_unix_ms ? h("div", { class: "muted a-expiry" }, "Unanswered, it is denied at " + timeOf(a.expires_at_unix_ms)) : null;
      card.append(expires || "", h("div", { class: "a-buttons" },
        h("button", { type: "button", class: "approve", onclick: () => answerApproval(a, "approve", card) }, "Approve"),
        h("button", { type: "button", class: "secondary deny", onclick: () => answerApproval(a, "deny", card) }, "Deny")));
    } else {
      card.append(h("div", { class: "a-outcome" }, badge(status), " ", OUTCOME[status] || ""));
    }
    return card;
  }

  function onApproval(a) {
    if (!a.approval_id) return;
    const old = conv.approvals.get(a.approval_id);
    const card = approvalCard(a);
    conv.approvals.set(a.approval_id, card);
    const stick = atBottom();
    if (old) old.replaceWith(card);
    else {
      const live = a.run_id && conv.live.get(a.run_id);
      if (live) els.messages.insertBefore(card, live); else els.messages.append(card);
    }
    scrollDown(stick);
  }

  // -- the conversation's stream and backfill ---------------------------------

  function onThreadEvent(type, d) {
    if (!conv || (d.thread_id && d.thread_id !== conv.id)) return;
    if (type === "transcript") addMessage(d);
    else if (type === "delta") onDelta(d);
    else if (type === "run") onRun(d);
    else if (type === "steer.accepted") steerState(d.message_id, "steer: waiting for the next step", "pending");
    else if (type === "steer.applied") onSteerApplied(d);
    else if (type === "tool") onTool(d);
    else if (type === "approval") onApproval(d);
  }

  /// Everything after the last cursor seen (a gap the stream dropped, or
  /// the whole history), page by page.
  async function backfill(c) {
    for (;;) {
      const page = await api("/v1/threads/" + encodeURIComponent(c.id) + "/transcript?after=" + c.lastCursor + "&limit=" + TRANSCRIPT_PAGE);
      if (conv !== c) return;
      const msgs = page.messages || [];
      for (const m of msgs) addMessage(m);
      if (msgs.length < TRANSCRIPT_PAGE) return;
    }
  }

  function drawRunState() {
    let active = null;
    for (const r of conv.runs.values()) if (ACTIVE.has(r.state) && r.state !== "queued") active = r;
    const last = [...conv.runs.values()].pop();
    const state = active ? active.state : last ? last.state : "idle";
    const shown = badge(state);
    shown.id = "run-status";
    els.status.replaceWith(shown);
    els.status = shown;
    els.chat.dataset.running = active ? "true" : "false";
    els.send.textContent = active ? "Steer" : "Send";
    els.interrupt.hidden = !active;
    els.stop.hidden = !active;
  }

  async function openThread(id, known) {
    stopConversation();
    const c = conv = newConv(id, known !== false);
    localStorage.setItem(THREAD_KEY, id);
    els.messages.replaceChildren();
    els.notices.replaceChildren();
    const d = threads.get(id);
    els.title.textContent = (d && d.title) || (c.known ? id : "New chat");
    drawRunState();
    drawList();
    // A new thread's stream is open before its first turn, so nothing of
    // its first answer is missed.
    if (!c.known) return attach(c);
    try {
      const snap = await api("/v1/threads/" + encodeURIComponent(id));
      if (conv !== c) return;
      if (snap.title) els.title.textContent = snap.title;
      for (const r of (snap.active_runs || []).concat(snap.queued_runs || []))
        c.runs.set(r.run_id, { run_id: r.run_id, butler: r.butler, state: r.state });
      // Questions asked before the page came: shown once the transcript is.
      c.asked = snap.pending_approvals || [];
    } catch (e) {
      if (e instanceof AuthError) return signIn("That token was refused.");
      if (e.status !== 404) notify("The thread did not load: " + e.message, "error");
    }
    attach(c);
  }

  /// Subscribes to the conversation's stream; each (re)connect backfills
  /// what was stored since the last message seen.
  function attach(c) {
    if (c.ctl) return;
    c.ctl = new AbortController();
    keepStreaming("/v1/threads/" + encodeURIComponent(c.id) + "/events", c.ctl, async () => {
      try { await backfill(c); } catch (e) { if (e instanceof AuthError) signIn("That token was refused."); }
      if (conv === c) {
        for (const r of c.runs.values()) onRun(r);
        for (const a of c.asked.splice(0)) if (!c.approvals.has(a.approval_id)) onApproval(a);
        els.chat.dataset.attached = "true";
        scrollDown(true);
      }
    }, onThreadEvent);
  }

  function stopConversation() {
    if (conv && conv.ctl) conv.ctl.abort();
    els.chat.dataset.attached = "false";
  }

  function stopAll() {
    stopConversation();
    if (summaryCtl) summaryCtl.abort();
    summaryCtl = null;
  }

  // -- sending ----------------------------------------------------------------

  let attachments = []; // [{name, media_type, data, size}]

  function drawAttachments() {
    els.attached.replaceChildren(...attachments.map((a, i) => h("li", {}, a.name,
      h("button", { type: "button", "aria-label": "Remove " + a.name, onclick: () => { attachments.splice(i, 1); drawAttachments(); } }, "×"))));
  }

  function readFile(file) {
    return new Promise((res, rej) => {
      const r = new FileReader();
      r.onload = () => res(String(r.result).replace(/^data:[^,]*,/, ""));
      r.onerror = () => rej(r.error || new Error("unreadable"));
      r.readAsDataURL(file);
    });
  }

  async function addFiles() {
    const files = [...els.files.files];
    els.files.value = "";
    let total = attachments.reduce((n, a) => n + a.size, 0);
    for (const f of files) {
      if (total + f.size > MAX_ATTACH_BYTES) {
        notify("“" + f.name + "” is too large: one message takes at most " + Math.round(MAX_ATTACH_BYTES / 1024) + " KiB of files.", "error");
        continue;
      }
      try {
        attachments.push({ name: f.name, media_type: f.type || "application/octet-stream", data: await readFile(f), size: f.size });
        total += f.size;
      } catch (e) {
        notify("“" + f.name + "” could not be read.", "error");
      }
    }
    drawAttachments();
  }

  /// The turn body for `text` with `mode`: the chosen butler, this
  /// browser's sender, the run options and the attached files.
  function turnBody(text, mode) {
    const body = { message_id: "m-" + randomHex(12), text: text, mode: mode, sender: sender() };
    if (els.butler.value) body.butler = els.butler.value;
    const model = els.model.value.trim();
    if (model) body.model = model;
    const steps = els.maxSteps.value.trim();
    if (steps) body.options = { max_steps: Number(steps) };
    if (attachments.length)
      body.attachments = attachments.map((a) => ({ name: a.name, media_type: a.media_type, data: a.data }));
    return body;
  }

  async function send(mode) {
    const text = els.text.value.trim();
    if (!text || !conv) return;
    const c = conv;
    const body = turnBody(text, mode);
    els.send.disabled = els.interrupt.disabled = true;
    try {
      const r = await post("/v1/threads/" + encodeURIComponent(c.id) + "/turns", body);
      els.text.value = "";
      attachments = [];
      drawAttachments();
      if (!c.known) {
        c.known = true;
        threads.set(c.id, Object.assign({ thread_id: c.id, title: text.split("\n")[0].slice(0, 80), run_status: "running", last_message_at_unix_ms: Date.now() }, threads.get(c.id) || {}));
        drawList();
      }
      if (r && r.run_id && !c.runs.has(r.run_id) && r.kind === "start")
        onRun({ run_id: r.run_id, butler: body.butler || "", state: "accepted" });
      attach(c);
      els.notices.replaceChildren();
    } catch (e) {
      if (e instanceof AuthError) return signIn("That token was refused.");
      notify("Not sent: " + e.message, "error");
    } finally {
      els.send.disabled = els.interrupt.disabled = false;
    }
  }

  async function stopRuns() {
    if (!conv) return;
    try {
      await post("/v1/threads/" + encodeURIComponent(conv.id) + "/cancel", {});
    } catch (e) {
      if (e instanceof AuthError) return signIn("That token was refused.");
      notify("Not stopped: " + e.message, "error");
    }
  }

  // -- start ------------------------------------------------------------------

  function closeSidebar() {
    els.chat.classList.remove("threads-open");
    els.toggle.setAttribute("aria-expanded", "false");
  }

  async function loadButlers() {
    const r = await api("/v1/butlers");
    const names = [...new Set((r.butlers || []).map((b) => b.name))].filter((n) => n !== "messenger").sort();
    const keep = localStorage.getItem(BUTLER_KEY) || "";
    els.butler.replaceChildren(h("option", { value: "" }, "Let the router choose"),
      ...names.map((n) => h("option", { value: n }, n)));
    els.butler.value = names.includes(keep) ? keep : "";
  }

  async function start() {
    if (started) return;
    try {
      await loadButlers();
      await loadThreads(false);
    } catch (e) {
      if (e instanceof AuthError) return signIn(sessionStorage.getItem(TOKEN_KEY) ? "That token was refused." : null);
      els.login.hidden = false;
      els.login.replaceChildren(h("h1", {}, "Something went wrong"), h("div", { class: "notice error" }, e.message));
      return;
    }
    started = true;
    sender();
    els.login.hidden = true;
    els.chat.hidden = false;
    els.forget.hidden = !sessionStorage.getItem(TOKEN_KEY);
    summaryCtl = new AbortController();
    keepStreaming("/v1/events/summary", summaryCtl, async () => {}, onSummary);
    const last = localStorage.getItem(THREAD_KEY);
    if (last && threads.has(last)) openThread(last, true);
    else openThread("web-" + randomHex(10), false);
    document.body.dataset.ready = "true";
  }

  els.form.addEventListener("submit", (ev) => { ev.preventDefault(); send("steer"); });
  els.interrupt.addEventListener("click", () => send("interrupt"));
  els.stop.addEventListener("click", stopRuns);
  els.text.addEventListener("keydown", (ev) => {
    if (ev.key === "Enter" && !ev.shiftKey && !ev.isComposing) { ev.preventDefault(); send("steer"); }
  });
  els.files.addEventListener("change", addFiles);
  els.butler.addEventListener("change", () => localStorage.setItem(BUTLER_KEY, els.butler.value));
  els.more.addEventListener("click", () => loadThreads(true).catch((e) => notify(e.message, "error")));
  els.newThread.addEventListener("click", () => { openThread("web-" + randomHex(10), false); closeSidebar(); els.text.focus(); });
  els.toggle.addEventListener("click", () => {
    const open = els.chat.classList.toggle("threads-open");
    els.toggle.setAttribute("aria-expanded", open ? "true" : "false");
  });
  els.forget.addEventListener("click", () => signIn(null));
  window.addEventListener("pagehide", stopAll);
  start();
})();
