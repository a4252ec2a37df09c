/* flow-sidecar dashboard: reads one page of /queues and the same page of /queues/history
   (and the broker-wide /alarms and /vhosts) every second and updates the table in place.
   Plain browser JavaScript, no build step. Queue and vhost names come from the broker, so
   they are only ever inserted as text, never parsed as HTML.

   The sidecar filters, sorts (stopped first by default) and pages: a refresh costs the
   same with 10,000 queues as with 50, a few kilobytes gzipped. Each shown queue's row is
   built once; a refresh changes only what differs (a bar's width, a sparkline's points, a
   text). Rows and sparklines of queues that leave the page are dropped. */
"use strict";

const POLL_MS = 1000;
const SPARK_W = 120;
const SPARK_H = 24;
const SVG_NS = "http://www.w3.org/2000/svg";
const NUMBER = new Intl.NumberFormat("en"); // one formatter: toLocaleString makes one per call

const DIMENSIONS = [
  { name: "count", stop: "qpid.flow_stop_count", resume: "qpid.flow_resume_count",
    depth: (d) => d.messages, sample: 1, format: (n) => `${NUMBER.format(n)} msg` },
  { name: "size", stop: "qpid.flow_stop_size", resume: "qpid.flow_resume_size",
    depth: (d) => d.bytes, sample: 2, format: formatBytes },
];
const STATE_LABELS = { absent: "not declared", stopped: "stopped", flowing: "flowing" };
/* flowStoppedBy, in words; a queue stopped by its own thresholds alone needs no note */
const STOPPED_BY = { queue: "own thresholds", stale: "stale data", "vhost-quota": "vhost quota",
                     "broker-alarm": "broker alarm" };

const depthHistory = new Map(); // queue key -> [[time, messages, bytes], ...], oldest first
const rows = new Map(); // queue key -> <tr>
let historySize = 120;
let since = null; // newest sample time held: what the next history request asks after
let shownKeys = ""; // the keys of the page whose history is held, sorted
let page = 1;

const keyOf = (vhost, queue) => `${vhost}\u0000${queue}`;

function el(tag, attributes = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes)) node.setAttribute(name, value);
  node.append(...children); // strings become text nodes
  return node;
}

function svg(tag, attributes = {}, ...children) {
  const node = document.createElementNS(SVG_NS, tag);
  for (const [name, value] of Object.entries(attributes)) node.setAttribute(name, value);
  node.append(...children);
  return node;
}

/* True (and remembered) when `signature` differs from the node's last one. */
function changed(node, signature) {
  if (node.signature === signature) return false;
  node.signature = signature;
  return true;
}

/* Writes to the DOM only when a value differs from the last one written there, which is
   remembered on the node: reading the DOM back (textContent, style) costs more. */
function write(node, key, value, apply) {
  const shown = (node.shown ||= {});
  if (shown[key] !== value) {
    shown[key] = value;
    apply();
  }
}

const setText = (node, text) => write(node, "text", text, () => { node.textContent = text; });
const setAttr = (node, name, value) => write(node, `@${name}`, value,
                                            () => node.setAttribute(name, value));
const setStyle = (node, property, value) => write(node, `style.${property}`, value,
                                                  () => { node.style[property] = value; });

function formatBytes(n) {
  if (n === null || n === undefined) return "bytes unknown"; // streams report none
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) {
    n /= 1024;
    i += 1;
  }
  return i === 0 ? `${n} B` : `${n.toFixed(1)} ${units[i]}`;
}

function formatAge(seconds) {
  const s = Math.max(0, Math.floor(seconds));
  const pad = (n) => String(n).padStart(2, "0");
  if (s < 60) return `${s}s ago`;
  if (s < 3600) return `${Math.floor(s / 60)}m ${pad(s % 60)}s ago`;
  if (s < 86400) return `${Math.floor(s / 3600)}h ${pad(Math.floor(s / 60) % 60)}m ago`;
  return `${Math.floor(s / 86400)}d ${Math.floor(s / 3600) % 24}h ago`;
}

/* The dimensions the queue's thresholds watch (a stop level above 0), count first. */
function watched(q) {
  return DIMENSIONS.filter((dim) => q.thresholds && q.thresholds[dim.stop] > 0);
}

/* One dimension's bar: depth as a fill, resume and stop as markers, and a label. */
function meter(dim) {
  const fill = el("div", { class: "fill" });
  const resume = el("div", { class: "mark resume" });
  const stop = el("div", { class: "mark stop" });
  const label = el("span", { class: "label" });
  const node = el("div", { class: "meter", "data-dimension": dim.name },
    el("div", { class: "bar" }, fill, resume, stop), label);
  const show = (q) => {
    const depth = dim.depth(q.depth);
    const stopAt = q.thresholds[dim.stop];
    const resumeAt = q.thresholds[dim.resume];
    const scale = Math.max(stopAt * 1.25, depth, 1);
    const at = (value) => `${Math.min(100, (100 * value) / scale).toFixed(2)}%`;
    setStyle(fill, "width", at(depth));
    setStyle(resume, "left", at(resumeAt));
    setStyle(stop, "left", at(stopAt));
    setAttr(resume, "title", `resume below ${resumeAt}`);
    setAttr(stop, "title", `stop above ${stopAt}`);
    setText(label, `${dim.format(depth)} · stop ${dim.format(stopAt)} · ` +
      `resume ${dim.format(resumeAt)} (${q.sources[dim.name]})`);
  };
  return { node, show };
}

/* Why a queue is stopped, when it is not (only) its own thresholds: "by vhost quota". */
function showWhy(node, q) {
  const by = q.flowStoppedBy || [];
  const note = by.length && by.some((b) => b !== "queue")
    ? `by ${by.map((b) => STOPPED_BY[b] || b).join(" + ")}` : "";
  setText(node, note);
  write(node, "hidden", !note, () => { node.hidden = !note; });
  setAttr(node, "title", (q.flowStopReasons || []).map((r) => r.detail).join("\n"));
}

/* The banner: every broker alarm in force and every overfull vhost, from /alarms and
   /vhosts. Each one stops every queue in its scope, whatever the queue's own depth. */
function showBrokerWide(alarms, vhosts) {
  const items = [
    ...alarms.alarms.map((a) => `${a.resource} alarm on node ${a.node}` +
      (a.since ? ` since ${new Date(a.since).toLocaleTimeString()}` : "") +
      ": RabbitMQ blocks every publisher; every queue is flow stopped"),
    ...vhosts.filter((v) => v.storeOverfull).map((v) => v.flowStopReasons
      .filter((r) => r.by === "vhost-quota").map((r) => r.detail).join("; ") +
      `: every queue of vhost ${v.vhost} is flow stopped`),
  ];
  const list = document.getElementById("broker-wide-list");
  if (changed(list, JSON.stringify(items))) {
    list.replaceChildren(...items.map((text) => el("li", {}, text)));
  }
  const banner = document.getElementById("broker-wide");
  write(banner, "hidden", !items.length, () => { banner.hidden = !items.length; });
}

function showDepth(td, q) {
  const dims = q.depth ? watched(q) : [];
  if (changed(td, dims.map((dim) => dim.name).join() || "none")) {
    td.meters = dims.map(meter);
    td.replaceChildren(...(dims.length ? td.meters.map((m) => m.node)
                                       : [el("span", { class: "label" })]));
  }
  if (dims.length) {
    for (const m of td.meters) m.show(q);
  } else if (q.depth) {
    setText(td.firstChild, `${DIMENSIONS[0].format(q.depth.messages)} · ` +
      `${formatBytes(q.depth.bytes)} · flow control off`);
  } else {
    setText(td.firstChild, q.exists ? "no depth sample yet" : "—");
  }
}

/* The last polls' depth in the first watched dimension, newest at the right edge, with
   the stop level dashed. */
function showSparkline(td, q, samples) {
  if (!td.firstChild) {
    td.append(svg("svg", { class: "spark", width: SPARK_W, height: SPARK_H,
                           viewBox: `0 0 ${SPARK_W} ${SPARK_H}` },
      svg("title"), svg("line", { class: "stop", x1: 0, x2: SPARK_W }), svg("polyline")));
  }
  const newest = samples.length ? samples[samples.length - 1][0] : null;
  if (!changed(td, JSON.stringify([historySize, samples.length, newest, q.thresholds]))) return;
  const [title, line, polyline] = td.firstChild.children;
  const dim = watched(q)[0] || DIMENSIONS[0];
  const values = samples.map((sample) => sample[dim.sample]);
  const stop = q.thresholds ? q.thresholds[dim.stop] : 0;
  const top = Math.max(1, stop || 0, ...values);
  const y = (v) => (SPARK_H - 1 - ((SPARK_H - 2) * v) / top).toFixed(1);
  const step = SPARK_W / Math.max(1, historySize - 1);
  const x0 = SPARK_W - step * (values.length - 1);
  polyline.setAttribute("points", values.map((v, i) => `${(x0 + step * i).toFixed(1)},${y(v)}`).join(" "));
  line.setAttribute("y1", y(stop || 0));
  line.setAttribute("y2", y(stop || 0));
  setStyle(line, "display", stop > 0 ? "" : "none");
  setText(title, values.length ? `last ${values.length} polls: ${dim.format(Math.min(...values))}` +
    ` to ${dim.format(Math.max(...values))}` : "no samples yet");
}

function problems(q) {
  const items = [
    ...(q.configErrors || []).map((text) => el("li", { class: "error" }, text)),
    ...(q.configWarnings || []).map((text) => el("li", { class: "warning" }, text)),
  ];
  if (!q.exists) items.push(el("li", { class: "warning" }, "settings stored, queue not declared"));
  return items.length ? el("ul", { class: "problems" }, ...items) : el("span", { class: "ok" }, "ok");
}

function newRow(q) {
  const tr = document.createElement("tr");
  const vhost = q.vhost === "/" ? "" : el("span", { class: "vhost" }, `${q.vhost} / `);
  tr.append(el("td", { class: "name" }, vhost, q.queue),
            el("td", {}, el("span", { class: "state" }), el("span", { class: "stale", hidden: "" }),
               el("span", { class: "warned", hidden: "" }), el("span", { class: "rate" }),
               el("span", { class: "why", hidden: "" })),
            el("td"), el("td"), el("td", { class: "num" }), el("td"), el("td"));
  setAttr(tr, "data-vhost", q.vhost);
  setAttr(tr, "data-queue", q.queue);
  const [, status, depth, recent, stops, transition, config] = tr.children;
  const [label, staleBadge, warnBadge, rate, why] = status.children;
  tr.parts = { label, staleBadge, warnBadge, rate, why, depth, recent, stops, transition, config };
  return tr;
}

/* The warning badge (advice: nobody is stopped by it) and the net fill rate, messages/s. */
function showForecast(badge, rate, q) {
  const warned = Boolean(q.exists && q.warning);
  setText(badge, warned ? "warning" : "");
  write(badge, "hidden", warned, () => { badge.hidden = !warned; });
  setAttr(badge, "title", q.secondsToStop == null
    ? "at or over its warning fraction of a stop"
    : `${q.secondsToStop} s to its stop at this fill rate`);
  const fill = q.exists && q.fillRate != null
    ? `${q.fillRate > 0 ? "+" : ""}${q.fillRate}/s` : "";
  setText(rate, fill);
  setAttr(rate, "title", fill ? "net fill rate, messages/s (negative: draining)" : "");
}

function showRow(tr, q, samples) {
  const state = !q.exists ? "absent" : q.flowStopped ? "stopped" : "flowing";
  const stale = Boolean(q.exists && q.stale);
  setAttr(tr, "data-state", state);
  setAttr(tr, "data-stale", String(stale));
  const { label, staleBadge, warnBadge, rate, why, depth, recent, stops, transition, config } = tr.parts;
  setText(label, STATE_LABELS[state]);
  setText(staleBadge, stale ? "stale" : "");
  write(staleBadge, "hidden", stale, () => { staleBadge.hidden = !stale; });
  setAttr(staleBadge, "title", `no depth sample within --stale-after; producers are told per --on-stale=${q.onStale}`);
  showForecast(warnBadge, rate, q);
  showWhy(why, q);
  showDepth(depth, q);
  showSparkline(recent, q, samples);
  setText(stops, String(q.flowStoppedCount));
  const at = q.lastTransitionAt;
  setText(transition, at ? formatAge((Date.now() - Date.parse(at)) / 1000) : "none since start");
  setAttr(transition, "title", at || "");
  transition.classList.toggle("ok", !at);
  if (changed(config, JSON.stringify([q.exists, q.configErrors, q.configWarnings]))) {
    config.replaceChildren(problems(q));
  }
}

function render(answer) {
  const present = new Set();
  const shown = [];
  let stopped = 0;
  for (const q of answer.items) {
    const key = keyOf(q.vhost, q.queue);
    present.add(key);
    if (q.flowStopped) stopped += 1;
    if (!rows.has(key)) rows.set(key, newRow(q));
    showRow(rows.get(key), q, depthHistory.get(key) || []);
    shown.push(rows.get(key));
  }
  for (const map of [rows, depthHistory]) {
    for (const key of [...map.keys()]) if (!present.has(key)) map.delete(key);
  }
  const tbody = document.querySelector("#queues tbody");
  if (shown.length !== tbody.children.length || shown.some((tr, i) => tbody.children[i] !== tr)) {
    tbody.replaceChildren(...shown);
  }
  document.getElementById("empty").hidden = shown.length > 0;
  const counted = answer.filtered_count === answer.total_count
    ? `${NUMBER.format(answer.total_count)} queues`
    : `${NUMBER.format(answer.filtered_count)} of ${NUMBER.format(answer.total_count)} queues`;
  setText(document.getElementById("summary"), `${counted} · ${stopped} flow stopped on this page`);
  setText(document.getElementById("page-of"),
          `page ${answer.page} of ${Math.max(1, answer.page_count)}`);
  document.getElementById("prev").disabled = answer.page <= 1;
  document.getElementById("next").disabled = answer.page >= answer.page_count;
}

function mergeHistory(answer) {
  historySize = answer.size;
  for (const { vhost, queue, samples } of answer.queues) {
    if (samples.length === 0) continue;
    const key = keyOf(vhost, queue);
    depthHistory.set(key, (depthHistory.get(key) || []).concat(samples).slice(-historySize));
    const newest = samples[samples.length - 1][0];
    if (since === null || newest > since) since = newest;
  }
}

async function getJSON(url) {
  const response = await fetch(url, { cache: "no-store" });
  if (!response.ok) throw new Error(`${url}: HTTP ${response.status}`);
  return response.json();
}

function setStatus(status, text) {
  const node = document.getElementById("status");
  node.dataset.status = status;
  node.textContent = text;
}

const filterInput = document.getElementById("filter");
const sortSelect = document.getElementById("sort");
const sizeSelect = document.getElementById("page-size");

/* The query that selects what is shown: the same for /queues and /queues/history. */
function selection() {
  const params = new URLSearchParams({ page: String(page), page_size: sizeSelect.value,
                                       sort: sortSelect.value });
  const filter = filterInput.value.trim();
  if (filter) params.set("name", filter);
  return params;
}

let refreshing = null;

/* One page of queues, then the history of exactly those queues: only what is new while
   the page shows the same queues, all of theirs when it changed. */
async function refresh() {
  try {
    const wanted = selection();
    const [queues, alarms, vhosts] = await Promise.all([
      getJSON(`/queues?${wanted}`), getJSON("/alarms"), getJSON("/vhosts")]);
    if (queues.page_count && page > queues.page_count) { // the filter left fewer pages
      page = queues.page_count;
      remember();
      return refresh();
    }
    const keys = queues.items.map((q) => keyOf(q.vhost, q.queue)).sort().join("\u0001");
    if (keys !== shownKeys) {
      depthHistory.clear();
      since = null;
      shownKeys = keys;
    }
    if (since !== null) wanted.set("since", String(since));
    mergeHistory(await getJSON(`/queues/history?${wanted}`));
    render(queues);
    showBrokerWide(alarms, vhosts);
    setStatus("ok", `updated ${new Date().toLocaleTimeString()}`);
  } catch (error) {
    setStatus("error", `cannot read the sidecar: ${error.message}`);
  }
}

/* Refresh now (a control changed) unless a refresh is on its way; the loop goes on. */
function refreshSoon() {
  refreshing = refreshing || refresh().finally(() => { refreshing = null; });
}

async function loop() {
  refreshSoon();
  await refreshing;
  setTimeout(loop, POLL_MS);
}

/* The view lives in the address too (`/ui?filter=orders&sort=name&page=2`), so it can be
   shared. */
function remember() {
  const url = new URL(location.href);
  const view = { filter: filterInput.value, sort: sortSelect.value,
                 page: page > 1 ? String(page) : "", size: sizeSelect.value };
  for (const [name, value] of Object.entries(view)) {
    if (value && !(name === "sort" && value === "stopped") && !(name === "size" && value === "50")) {
      url.searchParams.set(name, value);
    } else {
      url.searchParams.delete(name);
    }
  }
  history.replaceState(null, "", url);
}

function restore() {
  const params = new URLSearchParams(location.search);
  filterInput.value = params.get("filter") || "";
  sortSelect.value = params.get("sort") || "stopped";
  sizeSelect.value = params.get("size") || "50";
  page = Math.max(1, Number.parseInt(params.get("page") || "1", 10) || 1);
}

function changeView(toPage) {
  page = toPage;
  remember();
  refreshSoon();
}

let typing = null;
filterInput.addEventListener("input", () => {
  clearTimeout(typing);
  typing = setTimeout(() => changeView(1), 250); // one request per pause, not per key
});
sortSelect.addEventListener("change", () => changeView(1));
sizeSelect.addEventListener("change", () => changeView(1));
document.getElementById("prev").addEventListener("click", () => changeView(Math.max(1, page - 1)));
document.getElementById("next").addEventListener("click", () => changeView(page + 1));
restore();
loop();
