// The Butlers dashboard: a single page of hash routes over the node's /api
// and /v1 endpoints. Plain JavaScript, no build step, nothing from the
// network but the node. Everything shown is built with textContent (never
// innerHTML), so no data can become markup. See README.md here.
"use strict";

(function () {
  const TOKEN_KEY = "butlers.token";
  const main = document.getElementById("main");
  // What the current page started (timers, streams); stopped on leaving it.
  let cleanup = [];

  // -- small helpers ----------------------------------------------------------

  /// An element: `h("td", {class: "x", "data-label": "Id"}, child, ...)`.
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
    const s = state === null || state === undefined ? "—" : String(state);
    return h("span", { class: "badge " + s.replace(/[^a-z_-]/gi, "") }, s);
  }

  function when(ts) {
    if (!ts) return "—";
    const d = new Date(ts);
    return isNaN(d.getTime()) ? String(ts) : d.toLocaleString();
  }

  function num(x) {
    return x === null || x === undefined ? "—" : String(x);
  }

  /// A table: `cols` are [label, row => cell content].
  function table(cols, rows, empty) {
    if (!rows.length) return h("p", { class: "muted" }, empty || "Nothing yet.");
    return h("table", {},
      h("thead", {}, h("tr", {}, cols.map(([label]) => h("th", {}, label)))),
      h("tbody", {}, rows.map((r) => h("tr", {},
        cols.map(([label, cell]) => h("td", { "data-label": label }, cell(r)))))));
  }

  // Pages pass null for a part they leave out (replaceChildren would show
  // it as the text "null").
  function show(...nodes) {
    main.replaceChildren(...nodes.filter((n) => n !== null && n !== undefined && n !== false));
  }

  function notice(text, kind) {
    return h("div", { class: "notice " + (kind || ""), role: "status" }, text);
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
  /// message otherwise.
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

  function askToken(message) {
    stopPage();
    document.getElementById("forget").hidden = true;
    const input = h("input", { type: "password", id: "token", name: "token", autocomplete: "current-password", "aria-label": "Bearer token", placeholder: "http.token of the node" });
    const form = h("form", {
      id: "token-form",
      onsubmit: (ev) => {
        ev.preventDefault();
        sessionStorage.setItem(TOKEN_KEY, input.value.trim());
        route();
      },
    }, h("label", { for: "token" }, "This node wants its API token (kept in this tab only)."), input, h("button", { type: "submit" }, "Sign in"));
    show(h("section", { class: "login" }, h("h1", {}, "Sign in"), message ? notice(message, "error") : null, form));
    input.focus();
  }

  /// Runs a page; a missing or wrong token asks for one, other failures
  /// show on the page.
  async function guarded(fn) {
    try {
      await fn();
      document.getElementById("forget").hidden = !sessionStorage.getItem(TOKEN_KEY);
    } catch (e) {
      if (e instanceof AuthError) {
        const had = sessionStorage.getItem(TOKEN_KEY);
        sessionStorage.removeItem(TOKEN_KEY);
        askToken(had ? "That token was refused." : null);
      } else {
        show(h("h1", {}, "Something went wrong"), notice(e.message, "error"));
      }
    }
  }

  function every(ms, fn) {
    const id = setInterval(() => { fn().catch(() => {}); }, ms);
    cleanup.push(() => clearInterval(id));
  }

  // -- overview ---------------------------------------------------------------

  function card(label, value, sub, id) {
    return h("div", { class: "card", id: id }, h("div", { class: "label" }, label), h("div", { class: "value" }, value), sub ? h("div", { class: "sub" }, sub) : null);
  }

  function rate(rates, key) {
    return rates ? rates[key] + " / min" : "rate: measuring…";
  }

  async function overviewPage() {
    const draw = async () => {
      const o = (await api("/api/overview")).data;
      document.getElementById("node").textContent = o.node;
      const t = o.totals;
      show(
        h("h1", {}, "Overview"),
        h("div", { class: "cards", id: "overview-cards" },
          card("Received", t.received, rate(o.rates, "received_per_min"), "card-received"),
          card("Completed", t.completed, rate(o.rates, "completed_per_min"), "card-completed"),
          card("Errored", t.errored, rate(o.rates, "errored_per_min"), "card-errored"),
          card("Dead letters", t.dead_letters, "since start", "card-dead"),
          card("In flight", o.in_flight.requests, o.in_flight.segments_waiting + " segments waiting", "card-inflight"),
          card("Ingests awaiting commit", o.in_flight.ingests_awaiting_commit, null, "card-ingests"),
          card("Buffer queue", o.queues.buffer, "messages in memory", "card-buffer"),
          card("Open circuits", o.open_circuits.length, o.open_circuits.join(", ") || "none", "card-circuits")),
        h("h2", {}, "Butlers on this node"),
        table([
          ["Butler", (b) => b.name],
          ["Slots in use", (b) => num(b.active_sessions)],
          ["Waiting for a slot", (b) => num(b.waiting_for_slot)],
          ["Queue", (b) => num(b.queue_depth)],
          ["Circuit", (b) => badge(b.circuit_open ? "open" : "closed")],
        ], o.butlers, "No butler has reported yet."),
        h("p", { class: "muted" }, "Totals since the node started; rates over the last " + (o.rates ? o.rates.window_s + " s" : "few minutes") + ". Refreshes every 5 s."));
    };
    await draw();
    every(5000, draw);
  }

  // -- requests ---------------------------------------------------------------

  async function requestsPage(params) {
    const q = params.get("q") || "";
    const state = params.get("state") || "";
    const offset = parseInt(params.get("offset") || "0", 10) || 0;
    const limit = 25;
    const query = new URLSearchParams({ offset: String(offset), limit: String(limit) });
    if (q) query.set("q", q);
    if (state) query.set("state", state);
    const page = await api("/api/requests?" + query.toString());
    const go = (o) => {
      const p = new URLSearchParams();
      if (q) p.set("q", q);
      if (state) p.set("state", state);
      if (o) p.set("offset", String(o));
      location.hash = "#/requests" + (p.toString() ? "?" + p.toString() : "");
    };
    const input = h("input", { id: "request-search", type: "search", value: q, placeholder: "request id or its beginning", "aria-label": "Request id" });
    const select = h("select", { id: "request-state", "aria-label": "State" },
      ["", "accepted", "progress", "parsed", "errored", "cancelled"].map((s) => h("option", { value: s, selected: s === state }, s || "any state")));
    const form = h("form", {
      class: "inline",
      onsubmit: (ev) => {
        ev.preventDefault();
        const v = input.value.trim();
        if (/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i.test(v)) {
          location.hash = "#/requests/" + v.toLowerCase();
          return;
        }
        const p = new URLSearchParams();
        if (v) p.set("q", v);
        if (select.value) p.set("state", select.value);
        location.hash = "#/requests" + (p.toString() ? "?" + p.toString() : "");
      },
    }, input, select, h("button", { type: "submit" }, "Search"));
    const m = page.meta;
    show(
      h("h1", {}, "Requests"),
      form,
      table([
        ["Request", (r) => h("a", { href: "#/requests/" + r.request_id, class: "mono" }, r.request_id)],
        ["State", (r) => badge(r.lifecycle_state)],
        ["Received", (r) => when(r.received_at)],
        ["Butlers", (r) => (r.butlers || []).join(", ") || "—"],
        ["Error", (r) => r.error_class || "—"],
      ], page.data, "No request matches."),
      h("div", { class: "pager" },
        h("button", { class: "secondary", type: "button", disabled: m.offset === 0, onclick: () => go(Math.max(0, m.offset - m.limit)) }, "Newer"),
        h("span", { class: "muted", id: "request-count" }, m.total === 0 ? "0 requests" : (m.offset + 1) + "–" + (m.offset + page.data.length) + " of " + m.total),
        h("button", { class: "secondary", type: "button", disabled: !m.has_more, onclick: () => go(m.offset + m.limit) }, "Older")));
  }

  function timelineOf(r) {
    const items = [{ at: r.received_at, text: "received (accepted)", cls: "" }];
    for (const t of r.transitions || [])
      items.push({ at: t.at, text: (t.from || "—") + " → " + t.to + (t.by ? " by " + t.by : ""), cls: t.to === "errored" ? "bad" : t.to === "parsed" ? "good" : "" });
    for (const w of r.work_items || []) {
      items.push({ at: w.created_at, text: "attempt for " + w.butler + " (" + w.segment_id + "): work " + w.work_id, cls: "" });
      if (w.finished_at)
        items.push({ at: w.finished_at, text: "attempt for " + w.butler + " ended " + w.state + (w.error_class ? " — " + w.error_class : ""), cls: w.error_class ? "bad" : "good" });
    }
    for (const d of r.dead_letters || [])
      items.push({ at: d.created_at, text: "dead letter: " + d.butler + " (" + d.segment_id + ") after " + d.attempts + " attempts — " + d.error_class, cls: "bad" });
    for (const a of r.operator_actions || [])
      items.push({ at: a.at, text: a.action + " by " + a.who + ": " + a.why + " → " + a.result, cls: "" });
    if (r.completed_at) items.push({ at: r.completed_at, text: "completed: " + r.lifecycle_state, cls: r.lifecycle_state === "errored" ? "bad" : "good" });
    items.sort((a, b) => new Date(a.at) - new Date(b.at));
    return h("ol", { class: "timeline", id: "timeline" }, items.map((i) => h("li", { class: i.cls }, h("div", { class: "when" }, when(i.at)), h("div", {}, i.text))));
  }

  async function requestPage(id) {
    const r = (await api("/api/requests/" + encodeURIComponent(id))).data;
    show(
      h("h1", {}, "Request ", h("span", { class: "mono", id: "request-id" }, r.request_id)),
      h("div", { class: "cards" },
        card("State", badge(r.lifecycle_state), r.error_class ? r.error_class + (r.error_message ? ": " + r.error_message : "") : null, "request-state"),
        card("Received", h("span", { class: "small" }, when(r.received_at)), r.request_context ? r.request_context.source_channel + " from " + r.request_context.source_sender_identity : null),
        card("Attempts", r.attempts, r.plan ? "router " + r.plan.router + ", " + r.plan.fanout_mode : null),
        card("Tokens", r.usage ? r.usage.total_tokens : "—", r.usage && r.usage.cost_usd !== null ? "$" + r.usage.cost_usd : null)),
      r.lifecycle_state === "errored" ? replayForm(r.request_id, () => route()) : null,
      h("h2", {}, "Message"),
      h("p", {}, r.normalized_text),
      h("h2", {}, "Subrequests"),
      table([
        ["Segment", (s) => s.segment_id],
        ["Butler", (s) => s.butler],
        ["State", (s) => badge(s.state)],
        ["Attempts", (s) => num(s.attempts)],
        ["Error", (s) => s.error_class ? s.error_class + (s.error_message ? ": " + s.error_message : "") : "—"],
      ], r.subrequests || [], "No subrequests (not planned yet)."),
      h("h2", {}, "Timeline"),
      timelineOf(r));
  }

  // -- replay (audited) -------------------------------------------------------

  /// A Replay button that asks who and why, then calls the audited
  /// POST /v1/requests/{id}/replay.
  function replayForm(id, done) {
    const box = h("div", { class: "replay", "data-request": id });
    const open = h("button", {
      type: "button", class: "replay-open",
      onclick: () => {
        open.hidden = true;
        const who = h("input", { name: "who", class: "replay-who", placeholder: "who (you)", "aria-label": "Who", required: true });
        const why = h("input", { name: "why", class: "replay-why", placeholder: "why", "aria-label": "Why", required: true });
        const status = h("div", { class: "replay-status" });
        const form = h("form", {
          class: "replay-form",
          onsubmit: async (ev) => {
            ev.preventDefault();
            if (!who.value.trim() || !why.value.trim()) {
              status.replaceChildren(notice("Say who you are and why.", "error"));
              return;
            }
            try {
              const res = await api("/v1/requests/" + encodeURIComponent(id) + "/replay", {
                method: "POST",
                headers: { "Content-Type": "application/json" },
                body: JSON.stringify({ who: who.value.trim(), why: why.value.trim() }),
              });
              status.replaceChildren(
                notice("Replayed (" + (res.result || "ok") + "): the request runs again.", "ok"),
                h("button", { type: "button", class: "secondary", onclick: done }, "Refresh"));
              form.querySelectorAll("input,button").forEach((x) => { x.disabled = true; });
            } catch (e) {
              if (e instanceof AuthError) return askToken("That token was refused.");
              status.replaceChildren(notice("Refused: " + e.message, "error"));
            }
          },
        }, who, why, h("button", { type: "submit", class: "replay-confirm" }, "Confirm replay"));
        box.append(form, status);
        who.focus();
      },
    }, "Replay");
    box.append(open);
    return box;
  }

  // -- butlers ----------------------------------------------------------------

  async function butlersPage() {
    const draw = async () => {
      const xs = (await api("/api/butlers")).data;
      show(
        h("h1", {}, "Butlers"),
        table([
          ["Butler", (b) => h("strong", { class: "butler-name" }, b.name)],
          ["Node", (b) => b.node],
          ["Status", (b) => badge(b.status)],
          ["Slots in use", (b) => num(b.active_sessions) + " / " + b.max_concurrent_sessions],
          ["Waiting for a slot", (b) => num(b.waiting_for_slot)],
          ["Queue", (b) => num(b.queue_depth)],
          ["Circuit", (b) => badge(b.circuit_open ? "open" : "closed")],
          ["About", (b) => b.description || "—"],
        ], xs, "No butlers registered."),
        h("p", { class: "muted" }, "Slots and queues are known for butlers on this node (— elsewhere); the circuit is the switchboard's view. Refreshes every 5 s."));
    };
    await draw();
    every(5000, draw);
  }

  // -- threads (live) ---------------------------------------------------------

  /// Reads the summary event stream with fetch(), which can send the
  /// Authorization header (EventSource cannot), and hands each event's
  /// type and parsed data to `onEvent`.
  async function readEvents(path, signal, onOpen, onEvent) {
    const r = await fetch(path, { headers: headers({ Accept: "text/event-stream" }), signal: signal });
    if (r.status === 401) throw new AuthError("token needed");
    if (!r.ok || !r.body) throw new Error("event stream: HTTP " + r.status);
    onOpen();
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
        const data = [];
        for (const line of frame.split("\n")) {
          if (line.startsWith("event:")) type = line.slice(6).trim();
          else if (line.startsWith("data:")) data.push(line.slice(5).replace(/^ /, ""));
        }
        if (!data.length) continue;
        let parsed = null;
        try { parsed = JSON.parse(data.join("\n")); } catch (e) { parsed = null; }
        onEvent(type, parsed);
      }
    }
  }

  async function threadsPage() {
    const threads = new Map();
    const state = h("p", { class: "muted", id: "stream-state" }, "Connecting to the summary stream…");
    const body = h("div", { id: "threads" });
    const draw = () => {
      const rows = [...threads.values()].sort((a, b) => b.updated_at_unix_ms - a.updated_at_unix_ms);
      body.replaceChildren(table([
        ["Thread", (t) => h("span", { class: "mono" }, t.thread_id)],
        ["Status", (t) => badge(t.run_status)],
        ["Active runs", (t) => (t.active_run_ids || []).length],
        ["Queued", (t) => num(t.queued_runs)],
        ["Updated", (t) => when(t.updated_at_unix_ms)],
      ], rows, "No thread has changed since this page opened."));
    };
    show(h("h1", {}, "Threads"), state, body);
    draw();
    const ctl = new AbortController();
    cleanup.push(() => ctl.abort());
    const run = async () => {
      while (!ctl.signal.aborted) {
        try {
          await readEvents("/v1/events/summary", ctl.signal, () => { state.textContent = "Live: summary stream connected."; }, (type, data) => {
            if (type === "summary" && data && data.thread_id) {
              threads.set(data.thread_id, data);
              draw();
            }
          });
        } catch (e) {
          if (ctl.signal.aborted) return;
          if (e instanceof AuthError) return askToken("That token was refused.");
          state.textContent = "Stream lost (" + e.message + "); reconnecting…";
        }
        await new Promise((res) => setTimeout(res, 2000));
      }
    };
    run();
  }

  // -- connectors -------------------------------------------------------------

  function countersOf(c) {
    const src = c.today || c.counters || c.summary || {};
    return Object.entries(src).filter(([, v]) => typeof v === "number").map(([k, v]) => k.replace(/_/g, " ") + ": " + v).join(", ") || "—";
  }

  async function connectorsPage() {
    let page;
    try {
      page = await api("/api/connectors");
    } catch (e) {
      if (e.status === 404) {
        show(h("h1", {}, "Connectors"), notice("This node serves no connector API (/api/connectors)."));
        return;
      }
      throw e;
    }
    const xs = page.data || [];
    show(
      h("h1", {}, "Connectors"),
      table([
        ["Connector", (c) => h("span", { class: "connector-name" }, c.connector_type + " / " + c.endpoint_identity)],
        ["Liveness", (c) => badge(c.liveness)],
        ["Reports", (c) => badge(c.state)],
        ["Last heartbeat", (c) => when(c.last_heartbeat_at)],
        ["Today", (c) => countersOf(c)],
        ["Last error", (c) => c.error_message || "—"],
      ], xs, "No connector has sent a heartbeat yet."),
      h("p", { class: "muted" }, "Liveness from the last heartbeat: online under 2 min, stale 2–4 min, offline beyond."));
  }

  // -- dead letters -----------------------------------------------------------

  async function deadLettersPage(params) {
    const state = params.get("state") || "open";
    const query = new URLSearchParams({ limit: "50" });
    if (state !== "all") query.set("state", state);
    const page = await api("/api/dead-letters?" + query.toString());
    const select = h("select", { id: "dead-state", "aria-label": "Which", onchange: () => { location.hash = "#/dead-letters?state=" + select.value; } },
      [["open", "not replayed"], ["replayed", "replayed"], ["all", "all"]].map(([v, t]) => h("option", { value: v, selected: v === state }, t)));
    show(
      h("h1", {}, "Dead letters"),
      h("div", { class: "toolbar" }, select, h("span", { class: "muted" }, page.meta.total + " in all")),
      table([
        ["Request", (d) => h("a", { href: "#/requests/" + d.request_id, class: "mono dead-request" }, d.request_id)],
        ["Butler", (d) => d.butler + " (" + d.segment_id + ")"],
        ["Error", (d) => d.error_class + (d.error_message ? ": " + d.error_message : "")],
        ["Attempts", (d) => d.attempts],
        ["Dead since", (d) => when(d.created_at)],
        ["Replayed", (d) => d.replayed_at ? when(d.replayed_at) + " (" + d.replay_count + "×)" : "—"],
        ["", (d) => d.lifecycle_state === "errored" ? replayForm(d.request_id, () => route()) : badge(d.lifecycle_state)],
      ], page.data, state === "open" ? "No dead letters waiting." : "None."));
  }

  // -- pending approvals ------------------------------------------------------

  function requesterOf(a) {
    const who = a.requester_channel + ":" + a.requester_sender;
    return a.requester_thread && a.requester_thread !== a.requester_sender ? who + " in " + a.requester_thread : who;
  }

  async function approvalsPage() {
    const draw = async () => {
      const page = await api("/api/approvals?limit=200");
      show(
        h("h1", {}, "Pending approvals"),
        h("div", { class: "toolbar" }, h("span", { class: "muted", id: "approvals-total" }, page.meta.total + " waiting")),
        table([
          ["Butler", (a) => h("strong", {}, a.butler)],
          ["Run", (a) => h("span", { class: "mono" }, a.run_id)],
          ["Tool", (a) => h("span", { class: "approval-tool" }, a.tool)],
          ["Summary", (a) => h("span", { class: "approval-summary" }, a.summary || "—")],
          ["Requester", (a) => requesterOf(a)],
          ["Asked", (a) => when(a.created_at)],
          ["Expires", (a) => when(a.expires_at)],
        ], page.data, "No question is waiting for an answer."),
        h("p", { class: "muted" }, "Tool calls that wait for the yes of the person who started the run (they answer in their chat, or through POST /v1/runs/{run_id}/approvals/{approval_id}); unanswered, they are denied at their expiry. Refreshes every 5 s."));
    };
    await draw();
    every(5000, draw);
  }

  // -- routing ----------------------------------------------------------------

  function stopPage() {
    for (const f of cleanup) f();
    cleanup = [];
  }

  function route() {
    stopPage();
    const hash = location.hash.replace(/^#\/?/, "") || "overview";
    const [path, qs] = hash.split("?");
    const params = new URLSearchParams(qs || "");
    const parts = path.split("/");
    const page = parts[0];
    for (const a of document.querySelectorAll("#nav a"))
      a.classList.toggle("active", a.dataset.page === page);
    document.body.dataset.page = page;
    let fn;
    if (page === "requests" && parts[1]) fn = () => requestPage(parts[1]);
    else if (page === "requests") fn = () => requestsPage(params);
    else if (page === "butlers") fn = butlersPage;
    else if (page === "threads") fn = threadsPage;
    else if (page === "connectors") fn = connectorsPage;
    else if (page === "dead-letters") fn = () => deadLettersPage(params);
    else if (page === "approvals") fn = approvalsPage;
    else fn = overviewPage;
    main.dataset.ready = "false";
    guarded(fn).then(() => { main.dataset.ready = "true"; });
  }

  document.getElementById("forget").addEventListener("click", () => {
    sessionStorage.removeItem(TOKEN_KEY);
    route();
  });
  window.addEventListener("hashchange", route);
  route();
})();
