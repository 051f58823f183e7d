// Talon management UI.
//
// Reads only this coordinator's /api/v1, by relative URL (same origin, and
// correct behind a proxy that mounts the listener under a path). Builds the
// DOM from text nodes only: API data never goes through an HTML parser. When a
// refresh fails, the last good data stays on screen, dimmed, under a STALE
// banner with its observation time and age (ADR 0001 section 8).
"use strict";

(() => {
  const POLL_MS = 3000;
  const MAX_BACKOFF_MS = 30000;
  const PAGE_LIMIT = 1000;
  const MAX_PAGES = 100;
  // TABLE_ROWS is how many node rows the table holds at once: a large
  // cluster is shown a page at a time, so the DOM (and the work of each
  // refresh) stays the same size whatever the number of nodes.
  const TABLE_ROWS = 100;
  const TOKEN_KEY = "talon.adminToken";

  const $ = (id) => document.getElementById(id);

  // state is everything the page knows; render() draws it.
  const state = {
    cluster: null, // last good GET /api/v1/cluster
    storeAlarms: [], // the store's active alarms, from the last summary (stale ones included)
    nodes: null, // last good node list (all pages; the first page alone while partialNodes)
    partialNodes: false, // the first load shows the first page while the rest arrives
    receivedAt: 0, // local time the last good data arrived
    failure: null, // {message, code, at} of the last failed refresh; null when current
    failures: 0, // consecutive failed refreshes
    retryAt: 0, // local time of the next attempt while failing
    needToken: false,
    tokenRejected: false,
    sort: { key: "role", dir: 1 },
    filter: { text: "", role: "", health: "" },
    selected: null, // {role, nodeId} of the detail view
    page: 0, // page of the node table shown (TABLE_ROWS rows each)
    reveal: null, // {role, nodeId} whose page to show once the nodes are known (a node opened by URL)
    placement: null, // {data, receivedAt} of the last explanation
    placementError: "",
    timer: 0,
    busy: false,
    // samples are each node's last two counter readings of one
    // incarnation (by heartbeat, on the server's clock), rates the rates
    // between them, history each node's recent request rates and
    // clusterHistory the cluster's (all in this tab only: nothing is kept
    // on the server).
    samples: new Map(),
    rates: new Map(),
    history: new Map(),
    clusterHistory: [],
    events: null, // {items, coordinator} of this coordinator's newest events; null when not served
  };
  const HISTORY = 30; // points per sparkline
  const EVENTS = 20; // newest events shown

  // ---- small DOM helpers -------------------------------------------------

  // el creates an element. props: className, text, attrs (attribute map),
  // on (event map); children: nodes or strings (as text nodes).
  function el(tag, props, ...children) {
    const e = document.createElement(tag);
    if (props) {
      if (props.className) e.className = props.className;
      if (props.text !== undefined) e.textContent = props.text;
      for (const [k, v] of Object.entries(props.attrs || {})) e.setAttribute(k, v);
      for (const [k, v] of Object.entries(props.on || {})) e.addEventListener(k, v);
    }
    for (const c of children) {
      if (c === null || c === undefined) continue;
      e.append(typeof c === "string" ? document.createTextNode(c) : c);
    }
    return e;
  }

  // setText changes an element's text only when it differs, so that live
  // regions announce changes, not repaints.
  function setText(e, s) {
    if (e.textContent !== s) e.textContent = s;
  }

  function fill(parent, nodes) {
    parent.replaceChildren(...nodes);
  }

  // ---- formatting --------------------------------------------------------

  function fmtTime(ms) {
    if (!ms) return "—";
    return new Date(ms).toISOString().replace("T", " ").replace(/\.\d+Z$/, " UTC");
  }

  // statusText says when a node's status (capacity, counters) was written
  // and how often a quiet node writes it.
  function statusText(n) {
    if (!n.statusAtUnixMs) return "—";
    const si = state.cluster && state.cluster.timing ? state.cluster.timing.statusIntervalMs : 0;
    return fmtTime(n.statusAtUnixMs) + " (" + fmtDuration(n.statusAgeMs) + " ago; capacity and counters are as of then" +
      (si > 0 ? ", written at least every " + fmtDuration(si) : "") + ")";
  }

  function fmtDuration(ms) {
    if (ms < 0) ms = 0;
    if (ms < 1000) return Math.round(ms) + " ms";
    const s = ms / 1000;
    if (s < 60) return s.toFixed(s < 10 ? 1 : 0) + " s";
    const m = Math.floor(s / 60);
    if (m < 60) return m + " min " + Math.floor(s % 60) + " s";
    const h = Math.floor(m / 60);
    if (h < 48) return h + " h " + (m % 60) + " min";
    return Math.floor(h / 24) + " d " + (h % 24) + " h";
  }

  function fmtBytes(n) {
    const units = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
    let i = 0;
    while (n >= 1024 && i < units.length - 1) {
      n /= 1024;
      i++;
    }
    return (i === 0 ? String(n) : n.toFixed(n < 10 ? 1 : 0)) + " " + units[i];
  }

  function fmtCount(n) {
    return Number(n).toLocaleString("en-US");
  }

  function hitRatio(n) {
    const c = n.counters;
    const total = c.hitsTotal + c.missesTotal;
    return total > 0 ? c.hitsTotal / total : null;
  }

  function fmtRatio(r) {
    return r === null ? "—" : (r * 100).toFixed(1) + "%";
  }

  // dataAge is the age of the last good data now: its age when the server
  // generated the answer plus the local time since. Both differences are
  // on one clock each, so a skew between browser and server does not count.
  function dataAge() {
    const m = state.cluster;
    return Math.max(0, m.generatedAtUnixMs - m.observedAtUnixMs) + (Date.now() - state.receivedAt);
  }

  // ---- API ---------------------------------------------------------------

  class APIError extends Error {
    constructor(status, code, message) {
      super(message);
      this.status = status;
      this.code = code;
    }
    toString() {
      if (this.status === 0) return this.message;
      return "HTTP " + this.status + " " + this.code + ": " + this.message;
    }
  }

  function token() {
    try {
      return sessionStorage.getItem(TOKEN_KEY) || "";
    } catch (_) {
      return "";
    }
  }

  function setToken(t) {
    try {
      if (t) sessionStorage.setItem(TOKEN_KEY, t);
      else sessionStorage.removeItem(TOKEN_KEY);
    } catch (_) {
      // Storage disabled: the token cannot be kept.
    }
  }

  // api GETs a path relative to the page and returns the decoded JSON, or
  // throws an APIError. The token goes in a header, never in the URL.
  async function api(path) {
    const headers = { Accept: "application/json" };
    const t = token();
    if (t) headers.Authorization = "Bearer " + t;
    let res;
    try {
      res = await fetch(path, { headers, cache: "no-store", credentials: "omit", redirect: "error" });
    } catch (e) {
      throw new APIError(0, "unreachable", "cannot reach the coordinator (" + (e && e.message ? e.message : "network error") + ")");
    }
    let body = null;
    try {
      body = await res.json();
    } catch (_) {
      body = null;
    }
    if (!res.ok) {
      const eb = body && body.error ? body.error : {};
      throw new APIError(res.status, eb.code || "http_error", eb.message || res.statusText || "request failed");
    }
    if (!body || typeof body !== "object") throw new APIError(res.status, "bad_response", "the answer is not a JSON object");
    return body;
  }

  // staleStoreAlarms returns the store alarms the coordinator's last good
  // summary carries, or none when it cannot give one.
  async function staleStoreAlarms() {
    try {
      const c = await api("api/v1/cluster?allowStale=true");
      return (c.store && c.store.alarms) || [];
    } catch (_) {
      return [];
    }
  }

  // allNodes reads every page of the node list. onFirstPage, when given,
  // is called with the first page's nodes when more pages follow, so the
  // first load can draw them while the rest arrives (the API's order is the
  // table's default order, role then node ID, so its first page of rows is
  // already right).
  async function allNodes(onFirstPage) {
    const items = [];
    let cont = "";
    for (let i = 0; i < MAX_PAGES; i++) {
      let q = "api/v1/nodes?limit=" + PAGE_LIMIT;
      if (cont) q += "&continue=" + encodeURIComponent(cont);
      const page = await api(q);
      items.push(...(page.items || []));
      cont = page.continue;
      if (!cont) return items;
      if (i === 0 && onFirstPage) onFirstPage(items.slice());
    }
    throw new APIError(0, "too_many_pages", "the node list did not end after " + MAX_PAGES + " pages");
  }

  // showFirstPage draws the first load's first page of nodes with the
  // cluster summary, when that has arrived, while the other pages load.
  function showFirstPage(cluster, nodes) {
    if (!cluster || state.cluster) return;
    state.cluster = cluster;
    replicasDefault(cluster.placementReplicas);
    state.storeAlarms = cluster.store.alarms || [];
    state.nodes = nodes;
    state.partialNodes = true;
    state.receivedAt = Date.now();
    render();
  }

  // newestEvents reads this coordinator's newest EVENTS events (an older
  // coordinator without the endpoint, or a failure, gives none: the
  // events are an extra, not a reason to go stale).
  async function newestEvents() {
    try {
      const head = await api("api/v1/events?limit=1");
      const after = Math.max(0, (head.lastSeq || 0) - EVENTS);
      const page = await api("api/v1/events?limit=" + EVENTS + "&after=" + after);
      return { items: page.items || [], coordinator: page.coordinator };
    } catch (_) {
      return null;
    }
  }

  // observeRates turns successive heartbeats into rates: counters move
  // when a node heartbeats, so a rate is the counters' difference over the
  // difference of the store's acceptance times, for one incarnation.
  function observeRates(nodes) {
    let clusterReq = 0;
    let known = false;
    const seen = new Set();
    for (const n of nodes) {
      const key = n.role + "/" + n.nodeId;
      seen.add(key);
      const prev = state.samples.get(key);
      const cur = { inc: n.incarnationId, at: n.statusAtUnixMs || n.updatedAtUnixMs, c: n.counters };
      if (!prev || prev.inc !== cur.inc) {
        state.samples.set(key, cur);
        state.rates.delete(key);
        state.history.delete(key);
        continue;
      }
      if (cur.at > prev.at) {
        const dt = (cur.at - prev.at) / 1000;
        const d = (f) => Math.max(0, cur.c[f] - prev.c[f]);
        const hits = d("hitsTotal");
        const misses = d("missesTotal");
        const r = {
          reqPerSec: d("requestsTotal") / dt,
          bytesPerSec: d("bytesServedTotal") / dt,
          hitNow: hits + misses > 0 ? hits / (hits + misses) : null,
        };
        state.rates.set(key, r);
        const h = state.history.get(key) || [];
        h.push(r.reqPerSec);
        state.history.set(key, h.slice(-HISTORY));
        state.samples.set(key, cur);
      }
      const r = state.rates.get(key);
      if (r && n.role === "worker") {
        clusterReq += r.reqPerSec;
        known = true;
      }
    }
    for (const key of state.samples.keys()) {
      if (!seen.has(key)) {
        state.samples.delete(key);
        state.rates.delete(key);
        state.history.delete(key);
      }
    }
    if (known) state.clusterHistory = [...state.clusterHistory, clusterReq].slice(-HISTORY);
  }

  // sparkline draws values as block characters (text: the CSP allows no
  // inline drawing, and text needs none).
  function sparkline(values) {
    if (!values || values.length < 2) return "";
    const blocks = "▁▂▃▄▅▆▇█";
    const top = Math.max(...values);
    return values.map((v) => blocks[top > 0 ? Math.min(7, Math.floor((v / top) * 7.999)) : 0]).join("");
  }

  function rateOf(n) {
    return state.rates.get(n.role + "/" + n.nodeId);
  }

  function fmtRate(v) {
    if (v === undefined || v === null) return "—";
    if (v >= 1e9) return (v / 1e9).toFixed(2) + "G";
    if (v >= 1e6) return (v / 1e6).toFixed(2) + "M";
    if (v >= 1e3) return (v / 1e3).toFixed(2) + "k";
    return v.toFixed(v < 10 ? 1 : 0);
  }

  // ---- refresh loop ------------------------------------------------------

  function schedule(ms) {
    clearTimeout(state.timer);
    state.timer = setTimeout(refresh, ms);
  }

  async function refresh() {
    clearTimeout(state.timer);
    if (state.busy) return;
    state.busy = true;
    try {
      const firstLoad = !state.cluster;
      let summary = null;
      const clusterRead = api("api/v1/cluster").then((c) => (summary = c));
      const [cluster, nodes] = await Promise.all([clusterRead, allNodes(firstLoad ? (first) => showFirstPage(summary, first) : null)]);
      if (firstLoad) performance.mark("talon:nodes-fetched");
      state.partialNodes = false;
      state.cluster = cluster;
      replicasDefault(cluster.placementReplicas);
      state.storeAlarms = cluster.store.alarms || [];
      state.nodes = nodes;
      observeRates(nodes);
      state.events = await newestEvents();
      state.receivedAt = Date.now();
      state.failure = null;
      state.failures = 0;
      state.needToken = false;
      state.tokenRejected = false;
      schedule(POLL_MS);
    } catch (e) {
      const err = e instanceof APIError ? e : new APIError(0, "client_error", String(e));
      state.failure = { message: err.toString(), code: err.code, at: Date.now() };
      if (err.status === 401) {
        // Wait for a token; polling resumes when one is given.
        state.tokenRejected = token() !== "";
        setToken("");
        state.needToken = true;
      } else {
        // A coordinator that fails closed because the store raised an
        // alarm (a full database) says so in its stale summary.
        if (err.code === "not_ready") state.storeAlarms = await staleStoreAlarms();
        state.failures++;
        const delay = Math.min(MAX_BACKOFF_MS, POLL_MS * 2 ** (state.failures - 1));
        state.retryAt = Date.now() + delay;
        schedule(delay);
      }
    } finally {
      state.busy = false;
    }
    render();
  }

  // ---- rendering ---------------------------------------------------------

  function render() {
    renderStatus();
    renderAuth();
    const c = state.cluster;
    $("cluster-label").hidden = !c;
    $("summary").hidden = !c;
    $("data").hidden = !c;
    $("data").classList.toggle("stale", !!(c && state.failure));
    tick();
    if (!c) return;
    renderHeader(c);
    renderCounts(c);
    renderCoordinators();
    renderEvents();
    renderNodes();
    renderDetail();
    renderPlacement();
  }

  function renderStatus() {
    const f = state.failure;
    let s;
    if (!f) s = state.cluster ? "Live: refreshes every " + POLL_MS / 1000 + " s" : "Loading…";
    else if (state.needToken) s = "Token required";
    else s = state.cluster ? "STALE: refresh failing" : "Unavailable";
    setText($("conn"), s);
    $("conn").classList.toggle("bad", !!f);
    $("forget-token").hidden = token() === "";

    // A missing token before any data is the token prompt's business;
    // once data is on screen, it is stale like after any other failure.
    const banner = $("banner");
    banner.hidden = !f || (state.needToken && !state.cluster);
    if (banner.hidden) return;
    setText($("banner-title"), state.cluster ? "STALE" : "UNAVAILABLE");
    setText(
      $("banner-text"),
      state.cluster
        ? "Showing the last good data, observed " + fmtTime(state.cluster.observedAtUnixMs) + " (revision " + state.cluster.revision + "). It may not describe the cluster now."
        : "No cluster data could be read yet.",
    );
    setText($("banner-error"), state.storeAlarms.length ? "Store alarm: " + alarmWords() : "Last refresh failed: " + f.message);
    $("retry").hidden = state.needToken;
  }

  // tick updates the clocks on screen: data age, retry countdown.
  function tick() {
    const c = state.cluster;
    if (c) setText($("observed"), fmtTime(c.observedAtUnixMs) + " · " + fmtDuration(dataAge()) + " ago");
    let s = "";
    if (state.failure) {
      if (c) s = "Data age " + fmtDuration(dataAge()) + ". ";
      if (!state.needToken) s += "Retrying in " + Math.max(0, Math.ceil((state.retryAt - Date.now()) / 1000)) + " s.";
    }
    setText($("banner-age"), s);
  }

  function renderAuth() {
    const wasHidden = $("auth").hidden;
    $("auth").hidden = !state.needToken;
    if (wasHidden && state.needToken) $("token").focus();
    setText($("auth-error"), state.tokenRejected ? "The token was rejected; enter a valid one." : "");
  }

  // alarmWords says what each active store alarm means and what to do.
  function alarmWords() {
    return state.storeAlarms.map((a) => a.message).join("; ");
  }

  function renderHeader(c) {
    setText($("cluster-id"), c.clusterId);
    let store = c.store.backend + " · " + (c.store.healthy ? "healthy" : "unhealthy" + (c.store.errorCode ? " (" + c.store.errorCode + ")" : ""));
    if (state.failure) store = c.store.backend + (state.failure.code === "not_ready" ? " · not readable now" : " · unknown now");
    if (state.storeAlarms.length) store = c.store.backend + " · " + alarmWords();
    setText($("store"), store);
    $("store").classList.toggle("bad", state.storeAlarms.length > 0);
    setText($("pv"), c.placementVersion);
    setText($("revision"), c.revision);
    setText($("served-by"), c.servedBy);
    document.title = "Talon " + c.clusterId + (state.failure ? " (STALE)" : "");
  }

  function renderCounts(c) {
    const row = (label, k) =>
      el("tr", null, el("th", { attrs: { scope: "row" }, text: label }), ...["total", "healthy", "degraded", "unhealthy", "unknown", "ready"].map((f) => el("td", { className: "num", text: String(k[f]) })));
    const w = c.nodes.workers;
    const co = c.nodes.coordinators;
    const all = {};
    for (const f of ["total", "healthy", "degraded", "unhealthy", "unknown", "ready"]) all[f] = w[f] + co[f];
    fill($("counts").tBodies[0], [row("Coordinators", co), row("Workers", w), row("All", all)]);
    setText($("eligible"), c.eligibleWorkers + " of " + w.total + " workers eligible for placement.");
    renderPresence(c.coordinators);
    renderUpgrade(c.upgrade);
    renderTotals(c.capacity);
  }

  // renderUpgrade says when more than one build runs (a rolling upgrade):
  // the cluster's feature level and how many processes run each version
  // (issue 46: nothing told an operator the cluster was mid-upgrade).
  function renderUpgrade(u) {
    const out = $("upgrade");
    out.hidden = !u || !u.mixed;
    if (out.hidden) {
      setText(out, "");
      return;
    }
    const byVersion = new Map();
    for (const v of u.versions) byVersion.set(v.version, (byVersion.get(v.version) || 0) + v.count);
    const parts = Array.from(byVersion, ([v, n]) => (v || "—") + " on " + n + (n === 1 ? " process" : " processes"));
    setText(out, "Mid-upgrade: cluster feature level " + u.featureLevel + " (this coordinator speaks " + u.serverLevel + "); versions " + parts.join(", ") + ".");
  }

  // renderPresence compares the live coordinators with coordinator-replicas,
  // naming the missing ones (issue 38: a missing coordinator was invisible).
  function renderPresence(p) {
    const out = $("presence");
    if (!p || !p.expected) {
      setText(out, "");
      return;
    }
    let t = "Coordinators: " + p.present + " of " + p.expected + " expected present, " + p.ready + " ready";
    if (p.present < p.expected) {
      t += (p.missing && p.missing.length ? ". Missing: " + p.missing.map((m) => m.nodeId).join(", ") : ". " + (p.expected - p.present) + " missing") + ".";
    } else {
      t += ".";
    }
    setText(out, t);
    out.className = p.complete ? "" : "bad";
  }

  // renderTotals shows the cluster's totals as the answering coordinator
  // computed them; a rate is "—" until it has seen two status writes.
  function renderTotals(t) {
    $("totals").hidden = !t || !t.workers;
    if (!t || !t.workers) return;
    setText($("total-resident"), fmtBytes(t.residentBytes) + " of " + fmtBytes(t.capacityBytes) + " on " + fmtCount(t.workers) + " workers");
    setText($("total-hit"), fmtRatio(t.hitRatio ?? null));
    setText($("total-req"), fmtRate(t.requestsPerSecond));
    setText($("total-bytes"), fmtRate(t.bytesServedPerSecond));
    setText($("total-errors"), fmtRate(t.backendErrorsPerSecond));
  }

  // renderCoordinators lists the coordinators as their records show them,
  // with this one's own view (revision, PlacementVersion, eligible). The
  // page may ask only its own coordinator (same origin); talonctl
  // coordinators list asks each for its view and checks agreement.
  function renderCoordinators() {
    const c = state.cluster;
    const coords = (state.nodes || []).filter((n) => n.role === "coordinator");
    const rows = coords.map((n) => {
      const self = n.nodeId === c.servedBy;
      return el(
        "tr",
        { attrs: { "data-coordinator": n.nodeId } },
        el("th", { attrs: { scope: "row" }, text: n.nodeId + (self ? " (this one)" : "") }),
        el("td", { text: n.ready ? "yes" : "no" + (n.notReadyReason ? " (" + n.notReadyReason + ")" : "") }),
        el("td", { text: n.capacity.storeHealthy ? "reads the store" : "store read failing" }),
        el("td", { className: "mono", text: self ? c.revision : "—" }),
        el("td", { className: "mono", text: self ? c.placementVersion : n.placementVersion || "—" }),
        el("td", { className: "num", text: self ? String(c.eligibleWorkers) : n.placementVersion ? String(n.eligibleWorkers || 0) : "—" }),
        el("td", { className: n.agree === "no" ? "bad" : "", text: agreeText(n, c) }),
        el("td", { text: n.version }),
        el("td", { className: "num", text: fmtDuration(n.heartbeatAgeMs) }),
      );
    });
    if (rows.length === 0) rows.push(el("tr", null, el("td", { attrs: { colspan: "9" }, className: "empty", text: "No coordinator record." })));
    fill($("coordinators").tBodies[0], rows);
    const unhealthy = coords.filter((n) => !n.ready || !n.capacity.storeHealthy).length;
    const disagree = coords.filter((n) => n.agree === "no").length;
    setText(
      $("coordinators-note"),
      coords.length +
        " coordinators, " +
        unhealthy +
        " not ready or not reading the store" +
        (disagree ? ", " + disagree + " DISAGREEING with this one's placement" : "") +
        ". Each answers from its own snapshot and publishes the placement it computed in its record; Agree compares it with this one's (talonctl coordinators list asks each directly).",
    );
    setText($("cluster-trend"), state.clusterHistory.length > 1 ? "Cluster req/s " + fmtRate(state.clusterHistory[state.clusterHistory.length - 1]) + " " + sparkline(state.clusterHistory) : "");
  }

  // agreeText says whether a coordinator's published placement is this
  // one's, in words (colour only repeats it).
  function agreeText(n, c) {
    if (n.agree === "yes") return "yes";
    if (n.agree === "no") return "NO: differs from " + c.servedBy;
    return "—";
  }

  function renderEvents() {
    const ev = state.events;
    $("events-section").hidden = !ev;
    if (!ev) return;
    setText($("events-h"), "Events observed by " + ev.coordinator);
    const rows = [...ev.items].reverse().map((e) =>
      el(
        "tr",
        { attrs: { "data-event": e.type } },
        el("td", { text: fmtTime(e.timeUnixMs) }),
        el("td", { text: e.type }),
        el("td", { text: e.nodeId ? e.role + "/" + e.nodeId : "—" }),
        el("td", { text: e.old && e.new ? e.old + " → " + e.new : e.new || "—" }),
        el("td", { text: e.reason || "—" }),
      ),
    );
    if (rows.length === 0) rows.push(el("tr", null, el("td", { attrs: { colspan: "5" }, className: "empty", text: "No events yet." })));
    fill($("events").tBodies[0], rows);
  }

  const HEALTH_RANK = { healthy: 0, degraded: 1, unhealthy: 2, unknown: 3 };

  // COLUMNS of the node table: heading, sort value, cell.
  const COLUMNS = [
    { key: "role", title: "Role", value: (n) => n.role, cell: (n) => n.role },
    { wrap: true, key: "nodeId", title: "Node ID", value: (n) => n.nodeId, cell: nodeLink },
    { key: "health", title: "Health", value: (n) => HEALTH_RANK[n.health] ?? 9, cell: healthCell },
    { key: "ready", title: "Ready", value: (n) => (n.ready ? 0 : 1), cell: (n) => (n.ready ? "yes" : "no") },
    // The status (capacity, counters) is written once per status interval
    // while heartbeats only renew the lease: its age says how fresh the
    // counters are, not whether the node is alive (Health says that).
    { key: "age", title: "HB age", num: true, value: (n) => n.heartbeatAgeMs, cell: (n) => fmtDuration(n.heartbeatAgeMs) },
    { wrap: true, key: "version", title: "Version", value: (n) => n.version, cell: (n) => n.version },
    { wrap: true, key: "address", title: "Address", value: (n) => n.address, cell: (n) => el("span", { className: "mono", text: n.address }) },
    { key: "resident", title: "Resident / capacity", num: true, value: (n) => n.capacity.residentBytes, cell: residentCell },
    { key: "hitNow", title: "Hit ratio now", num: true, value: (n) => rateOf(n)?.hitNow ?? -1, cell: (n) => fmtRatio(rateOf(n)?.hitNow ?? null) },
    { key: "reqs", title: "Req/s", num: true, value: (n) => rateOf(n)?.reqPerSec ?? -1, cell: (n) => fmtRate(rateOf(n)?.reqPerSec) },
    { key: "bytes", title: "Bytes/s", num: true, value: (n) => rateOf(n)?.bytesPerSec ?? -1, cell: (n) => fmtRate(rateOf(n)?.bytesPerSec) },
    { key: "trend", title: "Req/s trend", value: (n) => (state.history.get(n.role + "/" + n.nodeId) || []).length, cell: (n) => el("span", { className: "spark", text: sparkline(state.history.get(n.role + "/" + n.nodeId)) }) },
    { key: "hit", title: "Hit ratio (lifetime)", num: true, value: (n) => hitRatio(n) ?? -1, cell: (n) => fmtRatio(hitRatio(n)) },
    { wrap: true, key: "labels", title: "Labels", value: (n) => labelText(n), cell: (n) => el("span", { className: "mono", text: labelText(n) }) },
  ];

  function labelText(n) {
    return Object.keys(n.labels || {})
      .sort()
      .map((k) => k + "=" + n.labels[k])
      .join(", ");
  }

  function nodeLink(n) {
    return el("a", {
      className: "node-link",
      text: n.nodeId,
      attrs: { href: nodeHash(n), "data-node": n.role + "/" + n.nodeId },
    });
  }

  function healthCell(n) {
    const label = n.health === n.reportedHealth ? n.health : n.health + " (reports " + n.reportedHealth + ")";
    return el("span", { className: "health h-" + n.health, text: label });
  }

  function residentCell(n) {
    const cap = n.capacity.capacityBytes;
    if (!cap) return n.capacity.residentBytes ? fmtBytes(n.capacity.residentBytes) : "—";
    const pct = ((100 * n.capacity.residentBytes) / cap).toFixed(1);
    return el(
      "span",
      { className: "resident" },
      fmtBytes(n.capacity.residentBytes) + " / " + fmtBytes(cap) + " (" + pct + "%)",
    );
  }

  function matches(n) {
    const f = state.filter;
    if (f.role && n.role !== f.role) return false;
    if (f.health && n.health !== f.health) return false;
    if (!f.text) return true;
    const hay = [n.nodeId, n.role, n.health, n.address, n.adminAddress, n.version, n.incarnationId, ...Object.entries(n.labels || {}).map(([k, v]) => k + "=" + v)];
    const needle = f.text.toLowerCase();
    return hay.some((s) => String(s).toLowerCase().includes(needle));
  }

  // collate orders strings as localeCompare does, with one collator made
  // once rather than per comparison (a sort of 10,000 nodes makes
  // ~140,000 of them).
  const collate = new Intl.Collator().compare;

  function sorted(nodes) {
    const col = COLUMNS.find((c) => c.key === state.sort.key) || COLUMNS[0];
    const dir = state.sort.dir;
    return nodes.slice().sort((a, b) => {
      const va = col.value(a);
      const vb = col.value(b);
      let d = typeof va === "number" && typeof vb === "number" ? va - vb : collate(String(va), String(vb));
      if (d === 0) d = collate(a.role, b.role) || collate(a.nodeId, b.nodeId);
      return d * dir;
    });
  }

  function renderNodeHead() {
    const cells = COLUMNS.map((c) => {
      const active = state.sort.key === c.key;
      const th = el("th", { attrs: { scope: "col" }, className: c.num ? "num" : "" });
      if (active) th.setAttribute("aria-sort", state.sort.dir > 0 ? "ascending" : "descending");
      th.append(
        el(
          "button",
          { className: "sort", attrs: { type: "button", "data-sort": c.key }, on: { click: () => sortBy(c.key) } },
          c.title,
          el("span", { className: "arrow", attrs: { "aria-hidden": "true" }, text: active ? (state.sort.dir > 0 ? " ▲" : " ▼") : "" }),
        ),
      );
      return th;
    });
    fill($("nodes").tHead.rows[0], cells);
  }

  function sortBy(key) {
    state.sort = state.sort.key === key ? { key, dir: -state.sort.dir } : { key, dir: 1 };
    state.page = 0;
    renderNodeHead();
    renderNodes();
    const b = $("nodes").tHead.querySelector('button[data-sort="' + key + '"]');
    if (b) b.focus();
  }

  function renderNodes() {
    const all = state.nodes || [];
    const shown = sorted(all.filter(matches));
    const pages = Math.max(1, Math.ceil(shown.length / TABLE_ROWS));
    if (state.reveal && state.nodes) {
      const r = state.reveal;
      const i = shown.findIndex((n) => n.role === r.role && n.nodeId === r.nodeId);
      if (i >= 0) state.page = Math.floor(i / TABLE_ROWS);
      state.reveal = null;
    }
    state.page = Math.min(Math.max(state.page, 0), pages - 1);
    const first = state.page * TABLE_ROWS;
    const page = shown.slice(first, first + TABLE_ROWS);
    // Keep keyboard focus on the same node across a refresh.
    const focused = document.activeElement && document.activeElement.dataset ? document.activeElement.dataset.node : undefined;
    const rows = page.map((n) => {
      const tr = el("tr", null, ...COLUMNS.map((c) => el(c.key === "nodeId" ? "th" : "td", { className: c.num ? "num" : c.wrap ? "wrap" : "", attrs: c.key === "nodeId" ? { scope: "row" } : {} }, c.cell(n))));
      tr.dataset.node = n.role + "/" + n.nodeId;
      if (state.selected && state.selected.role === n.role && state.selected.nodeId === n.nodeId) tr.className = "selected";
      return tr;
    });
    if (rows.length === 0) rows.push(el("tr", null, el("td", { attrs: { colspan: String(COLUMNS.length) }, className: "empty", text: all.length ? "No node matches the filter." : "No live nodes." })));
    fill($("nodes").tBodies[0], rows);
    const loading = state.partialNodes ? " (the first " + all.length + "; loading the rest)" : "";
    setText($("shown"), (shown.length === all.length ? all.length + " nodes" : shown.length + " of " + all.length + " nodes match the filter") + loading);
    $("pager").hidden = pages <= 1;
    setText($("page-info"), "Rows " + (first + 1) + "–" + (first + page.length) + " of " + shown.length + " · page " + (state.page + 1) + " of " + pages);
    $("page-prev").disabled = state.page === 0;
    $("page-next").disabled = state.page >= pages - 1;
    if (focused) {
      const a = $("nodes").tBodies[0].querySelector('a[data-node="' + CSS.escape(focused) + '"]');
      if (a) a.focus();
    }
    if (state.nodes) markFirstRender();
  }

  // markFirstRender records, once, when the node table first showed data
  // (on a large cluster, the first page of nodes) and when the frame after
  // that was painted: performance marks talon:nodes-rendered and
  // talon:nodes-painted (beside talon:nodes-fetched, the first load's last
  // page received), for the UI's scale measurement and anyone's devtools.
  let firstRendered = false;
  function markFirstRender() {
    if (firstRendered) return;
    firstRendered = true;
    performance.mark("talon:nodes-rendered");
    requestAnimationFrame(() => setTimeout(() => performance.mark("talon:nodes-painted"), 0));
  }

  // ---- node detail -------------------------------------------------------

  function nodeHash(n) {
    return "#node/" + encodeURIComponent(n.role) + "/" + encodeURIComponent(n.nodeId);
  }

  function readHash() {
    const m = /^#node\/([^/]+)\/(.+)$/.exec(location.hash);
    state.selected = m ? { role: decodeURIComponent(m[1]), nodeId: decodeURIComponent(m[2]) } : null;
    state.reveal = state.selected;
  }

  function turnPage(delta) {
    state.page += delta;
    renderNodes();
  }

  function fields(dl, pairs) {
    const items = pairs.map(([k, v]) => el("div", null, el("dt", { text: k }), el("dd", null, v)));
    fill(dl, items.length ? items : [el("div", null, el("dt", { text: "none" }), el("dd"))]);
  }

  function renderDetail() {
    const sel = state.selected;
    const sec = $("detail");
    sec.hidden = !sel;
    if (!sel) return;
    const n = (state.nodes || []).find((x) => x.role === sel.role && x.nodeId === sel.nodeId);
    setText($("detail-h"), "Node " + sel.nodeId + " (" + sel.role + ")");
    setText($("detail-missing"), n ? "" : "This node is not in the snapshot: it left the cluster or its lease expired.");
    if (!n) {
      for (const id of ["detail-fields", "detail-capacity", "detail-counters", "detail-labels"]) fill($(id), []);
      return;
    }
    fields($("detail-fields"), [
      ["Node ID", n.nodeId],
      ["Role", n.role],
      ["Cluster ID", n.clusterId],
      ["Health", n.health],
      ["Reported health", n.reportedHealth],
      ["Ready", n.ready ? "yes" : "no"],
      ["Last heartbeat", fmtTime(n.heartbeatAtUnixMs || n.updatedAtUnixMs) + " (" + fmtDuration(n.heartbeatAgeMs) + " ago at observation)"],
      ["Status written", statusText(n)],
      ["Cordoned", n.cordon ? "by " + n.cordon.by + " at " + fmtTime(n.cordon.atUnixMs) + (n.cordon.persist ? ", kept across restarts" : "") + (n.drained ? "; drained" : "") : "no"],
      ...(n.revocation ? [["Revoked", "by " + n.revocation.by + " (" + n.revocation.reason + "): out of placement"]] : []),
      ["Heartbeat sequence", fmtCount(n.heartbeatSeq)],
      ["Record written", fmtTime(n.updatedAtUnixMs)],
      ["Started", fmtTime(n.startTimeUnixMs)],
      ["Version", n.version],
      ["Incarnation", n.incarnationId],
      [n.role === "worker" ? "Data address" : "Control address", n.address],
      ["Admin address", n.adminAddress || "—"],
    ]);
    const cap = n.capacity;
    const capRows = [
      ["Capacity", fmtBytes(cap.capacityBytes)],
      ["Resident", fmtBytes(cap.residentBytes)],
      ["Blocks", fmtCount(cap.blocks)],
      ["Pages", fmtCount(cap.pages)],
      ["In-flight loads", fmtCount(cap.inflightLoads)],
    ];
    if (n.role === "coordinator") capRows.push(["Store healthy", cap.storeHealthy ? "yes" : "no"]);
    fields($("detail-capacity"), capRows);
    const c = n.counters;
    fields($("detail-counters"), [
      ["Requests", fmtCount(c.requestsTotal)],
      ["Errors", fmtCount(c.errorsTotal)],
      ["Hits", fmtCount(c.hitsTotal)],
      ["Misses", fmtCount(c.missesTotal)],
      ["Hit ratio", fmtRatio(hitRatio(n))],
      ["Bytes served", fmtBytes(c.bytesServedTotal)],
      ["Backend fetches", fmtCount(c.backendFetchesTotal)],
      ["Backend errors", fmtCount(c.backendErrorsTotal)],
      ["Evictions", fmtCount(c.evictionsTotal)],
      ["Placement lookups", fmtCount(c.placementLookupsTotal)],
      ["Placement errors", fmtCount(c.placementErrorsTotal)],
      ["Store errors", fmtCount(c.storeErrorsTotal)],
    ]);
    fields(
      $("detail-labels"),
      Object.keys(n.labels || {})
        .sort()
        .map((k) => [k, n.labels[k]]),
    );
  }

  // ---- placement explainer -----------------------------------------------

  // replicasDefault shows the cluster's placementReplicas (what clients
  // read with, and the API's default) in the explainer until the user
  // changes the field.
  function replicasDefault(n) {
    const input = $("pl-replicas");
    if (!n || input.dataset.edited === "true") return;
    input.value = String(n);
  }

  async function explain(ev) {
    ev.preventDefault();
    const key = $("pl-key").value;
    // Empty: the API's default, the cluster's placementReplicas.
    const replicas = $("pl-replicas").value;
    if (!key) return;
    try {
      const data = await api("api/v1/placement?key=" + encodeURIComponent(key) + (replicas ? "&replicas=" + encodeURIComponent(replicas) : ""));
      state.placement = { data, receivedAt: Date.now() };
      state.placementError = "";
    } catch (e) {
      state.placementError = String(e);
      if (e instanceof APIError && e.status === 401) {
        setToken("");
        state.needToken = true;
        render();
      }
    }
    renderPlacement();
  }

  function table(caption, heads, rows, empty) {
    const t = el("table", { className: "explain" }, el("caption", { text: caption }), el("thead", null, el("tr", null, ...heads.map((h) => el("th", { attrs: { scope: "col" }, text: h })))));
    const body = el("tbody");
    for (const r of rows) body.append(el("tr", null, ...r.map((v, i) => (i === 0 ? el("th", { attrs: { scope: "row" } }, v) : el("td", null, v)))));
    if (!rows.length) body.append(el("tr", null, el("td", { attrs: { colspan: String(heads.length) }, className: "empty", text: empty })));
    t.append(body);
    return t;
  }

  function renderPlacement() {
    const out = [];
    if (state.placementError) out.push(el("p", { className: "error", text: "Explanation failed: " + state.placementError }));
    const p = state.placement;
    if (p) {
      const d = p.data;
      const stale = !!state.placementError;
      const parts = [];
      if (stale) parts.push(el("strong", { text: "STALE: previous result. " }));
      parts.push("Key ", el("code", { text: d.key }), ", " + d.replicas + (d.replicas === 1 ? " replica" : " replicas") + ": ");
      parts.push(d.outcome === "ok" ? "owners found" : "no owner (" + d.outcome + ")");
      parts.push(". Placement version ", el("code", { text: d.placementVersion }), ", observed " + fmtTime(d.observedAtUnixMs) + ".");
      out.push(el("p", { className: stale ? "stale-note" : "" }, ...parts));
      if (state.cluster && state.cluster.placementVersion !== d.placementVersion) {
        out.push(el("p", { className: "note", text: "The placement version has changed since this explanation; explain again for the current owners." }));
      }
      const owners = el("ol", { className: "owners", attrs: { "aria-label": "Owners, best first" } });
      for (const o of d.owners) owners.append(el("li", null, el("strong", { text: o.nodeId }), " ", el("span", { className: "mono", text: o.address })));
      out.push(el("h3", { text: "Owners" }), d.owners.length ? owners : el("p", { text: "None: no worker is eligible." }));
      const ownerIds = new Set(d.owners.map((o) => o.nodeId));
      out.push(
        table(
          "Candidates by HRW score, best first",
          ["Rank", "Node ID", "Address", "Score", "Owner"],
          d.candidates.map((c) => [String(c.rank), c.nodeId, el("span", { className: "mono", text: c.address }), el("code", { text: c.score }), ownerIds.has(c.nodeId) ? "yes" : "no"]),
          "No eligible worker.",
        ),
      );
      out.push(
        table(
          "Workers excluded from placement",
          ["Node ID", "Reason", "Health"],
          d.excluded.map((x) => [x.nodeId, x.reason.replace("_", " "), x.health]),
          "None.",
        ),
      );
    }
    const box = $("placement");
    box.classList.toggle("stale", !!(p && state.placementError));
    fill(box, out);
  }

  // ---- wiring ------------------------------------------------------------

  // loadUIConfig reads the deployment's UI options once: a dashboard link.
  async function loadUIConfig() {
    try {
      const res = await fetch("ui-config.json", { cache: "no-store", credentials: "omit", redirect: "error" });
      if (!res.ok) return;
      const cfg = await res.json();
      const u = cfg && typeof cfg.dashboardUrl === "string" ? cfg.dashboardUrl : "";
      if (!/^https?:\/\//.test(u)) return;
      const a = $("dashboard");
      a.href = u;
      a.hidden = false;
    } catch (_) {
      // No options: no link.
    }
  }

  function init() {
    loadUIConfig();
    renderNodeHead();
    readHash();
    window.addEventListener("hashchange", () => {
      readHash();
      if (state.cluster) {
        renderNodes();
        renderDetail();
        if (state.selected) $("detail").scrollIntoView({ block: "nearest" });
      }
    });
    $("detail-close").addEventListener("click", () => {
      history.replaceState(null, "", location.pathname + location.search);
      state.selected = null;
      renderNodes();
      renderDetail();
    });
    const onFilter = () => {
      state.filter = { text: $("filter").value.trim(), role: $("filter-role").value, health: $("filter-health").value };
      state.page = 0;
      if (state.cluster) renderNodes();
    };
    $("filters").addEventListener("input", onFilter);
    $("filters").addEventListener("submit", (ev) => ev.preventDefault());
    $("placement-form").addEventListener("submit", explain);
    $("pl-replicas").addEventListener("input", () => {
      $("pl-replicas").dataset.edited = "true";
    });
    $("retry").addEventListener("click", refresh);
    $("page-prev").addEventListener("click", () => turnPage(-1));
    $("page-next").addEventListener("click", () => turnPage(1));
    $("auth-form").addEventListener("submit", (ev) => {
      ev.preventDefault();
      const t = $("token").value.trim();
      if (!t) return;
      setToken(t);
      $("token").value = "";
      state.needToken = false;
      state.tokenRejected = false;
      render();
      refresh();
    });
    $("forget-token").addEventListener("click", () => {
      setToken("");
      refresh();
    });
    setInterval(tick, 1000);
    refresh();
  }

  init();
})();
