// jstormpy web UI: polls the Topology Master's JSON API every second (no libraries, no CDN).
"use strict";

const POLL_MS = 1000;
const SVG_NS = "http://www.w3.org/2000/svg";
const $ = (sel) => document.querySelector(sel);

function fmtNum(n) {
  if (n === null || n === undefined) return "-";
  const a = Math.abs(n);
  if (a >= 1e9) return (n / 1e9).toFixed(2) + "G";
  if (a >= 1e6) return (n / 1e6).toFixed(2) + "M";
  if (a >= 1e4) return (n / 1e3).toFixed(1) + "k";
  if (a >= 100 || Number.isInteger(n)) return n.toFixed(0);
  return n.toFixed(1);
}
function fmtBytes(b) {
  if (b === null || b === undefined || b === 0) return "-";
  if (b >= 1 << 30) return (b / (1 << 30)).toFixed(2) + " GiB";
  if (b >= 1 << 20) return (b / (1 << 20)).toFixed(1) + " MiB";
  if (b >= 1 << 10) return (b / (1 << 10)).toFixed(1) + " KiB";
  return b + " B";
}
function fmtDur(s) {
  if (s === null || s === undefined) return "-";
  if (s < 60) return s.toFixed(0) + " s";
  if (s < 3600) return Math.floor(s / 60) + " m " + Math.floor(s % 60) + " s";
  return Math.floor(s / 3600) + " h " + Math.floor((s % 3600) / 60) + " m";
}
function fmtTime(t) { return t ? new Date(t * 1000).toLocaleTimeString() : "-"; }
function esc(s) {
  return String(s ?? "").replace(/[&<>"']/g, (c) =>
    ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" }[c]));
}
// queue fill 0..1 -> green .. amber .. red
function fillColor(f) {
  f = Math.max(0, Math.min(1, f || 0));
  const lerp = (a, b, t) => Math.round(a + (b - a) * t);
  const [c0, c1, c2] = [[46, 125, 50], [249, 168, 37], [198, 40, 40]];
  const [a, b, t] = f < 0.5 ? [c0, c1, f / 0.5] : [c1, c2, (f - 0.5) / 0.5];
  return `rgb(${lerp(a[0], b[0], t)},${lerp(a[1], b[1], t)},${lerp(a[2], b[2], t)})`;
}
function el(name, attrs, text) {
  const e = document.createElementNS(SVG_NS, name);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  if (text !== undefined) e.textContent = text;
  return e;
}

// ---------------------------------------------------------------- topology graph
let graphKey = "";
function layout(components) {
  const byName = Object.fromEntries(components.map((c) => [c.name, c]));
  const depth = {};
  const visit = (name, seen) => {
    if (depth[name] !== undefined) return depth[name];
    if (seen.has(name)) return 0;  // cycle guard
    seen.add(name);
    const c = byName[name];
    const srcs = (c && c.inputs) ? c.inputs.map((i) => i.source).filter((s) => byName[s]) : [];
    depth[name] = srcs.length ? 1 + Math.max(...srcs.map((s) => visit(s, seen))) : 0;
    return depth[name];
  };
  components.forEach((c) => visit(c.name, new Set()));
  const cols = {};
  components.forEach((c) => (cols[depth[c.name]] = cols[depth[c.name]] || []).push(c.name));
  const W = 170, H = 64, GX = 80, GY = 24;
  const pos = {};
  let maxRows = 0;
  Object.entries(cols).forEach(([d, names]) => {
    maxRows = Math.max(maxRows, names.length);
    names.forEach((n, i) => (pos[n] = { x: 20 + d * (W + GX), y: 20 + i * (H + GY), w: W, h: H }));
  });
  const ncols = Object.keys(cols).length;
  return { pos, width: 40 + ncols * W + (ncols - 1) * GX, height: 40 + maxRows * (H + GY) - GY };
}

function drawGraph(components) {
  const svg = $("#graph");
  const key = JSON.stringify(components.map((c) => [c.name, c.inputs]));
  if (key === graphKey) return;
  graphKey = key;
  svg.textContent = "";
  const { pos, width, height } = layout(components);
  svg.setAttribute("viewBox", `0 0 ${width} ${height}`);
  svg.setAttribute("height", height);
  const defs = el("defs");
  const marker = el("marker", { id: "arrow", viewBox: "0 0 10 10", refX: 10, refY: 5,
    markerWidth: 7, markerHeight: 7, orient: "auto-start-reverse" });
  marker.appendChild(el("path", { d: "M 0 0 L 10 5 L 0 10 z", fill: "#90a4ae" }));
  defs.appendChild(marker);
  svg.appendChild(defs);
  for (const c of components) {
    for (const inp of c.inputs || []) {
      const a = pos[inp.source], b = pos[c.name];
      if (!a || !b) continue;
      const x1 = a.x + a.w, y1 = a.y + a.h / 2, x2 = b.x, y2 = b.y + b.h / 2;
      const mx = (x1 + x2) / 2;
      svg.appendChild(el("path", { class: "edge", "data-from": inp.source, "data-to": c.name,
        d: `M ${x1} ${y1} C ${mx} ${y1}, ${mx} ${y2}, ${x2} ${y2}` }));
      const label = inp.grouping + (inp.stream && inp.stream !== "default" ? ` [${inp.stream}]` : "");
      svg.appendChild(el("text", { class: "edge-label", x: mx, y: (y1 + y2) / 2 - 4 }, label));
    }
  }
  for (const c of components) {
    const p = pos[c.name];
    const g = el("g", { class: "node", "data-component": c.name, "data-kind": c.kind,
      transform: `translate(${p.x},${p.y})` });
    g.appendChild(el("rect", { width: p.w, height: p.h, fill: fillColor(0) }));
    g.appendChild(el("text", { class: "name", x: p.w / 2, y: 18 }, c.name));
    g.appendChild(el("text", { class: "rate", x: p.w / 2, y: 36 }, "-"));
    g.appendChild(el("text", { class: "fill", x: p.w / 2, y: 53 },
      `${c.kind} ×${c.parallelism}`));
    g.appendChild(el("title", {}, `${c.name} (${c.class})`));
    svg.appendChild(g);
  }
}

function updateGraph(components, metrics) {
  for (const c of components) {
    const g = document.querySelector(`#graph .node[data-component="${CSS.escape(c.name)}"]`);
    if (!g) continue;
    const m = (metrics.components || {})[c.name];
    const rate = m ? (c.kind === "spout" ? m.emit_rate : m.execute_rate) : null;
    const fill = m ? m.max_queue_fill : 0;
    g.querySelector("rect").setAttribute("fill", fillColor(fill));
    g.querySelector("text.rate").textContent = rate === null ? "-" : `${fmtNum(rate)}/s`;
    g.setAttribute("data-rate", rate === null ? "" : String(rate));
    g.setAttribute("data-fill", String(fill));
    g.querySelector("text.fill").textContent =
      `${c.kind} ×${c.parallelism} · queue ${Math.round(fill * 100)}%`;
  }
}

// ---------------------------------------------------------------- tables
function setRows(tbody, rows) {
  tbody.innerHTML = rows.join("");
}

function renderTasks(metrics, status) {
  const lastErr = {};
  for (const e of status.errors || []) lastErr[e.task] = e;
  const rows = Object.entries(metrics.tasks || {}).map(([tid, t]) => {
    const fill = t.queue_capacity ? t.queue_depth / t.queue_capacity : 0;
    const e = lastErr[tid];
    return `<tr data-task="${tid}" data-component="${esc(t.component)}" data-executed="${t.executed}"` +
      ` data-emitted="${t.emitted}">` +
      `<td>${tid}</td><td class="text">${esc(t.component)}</td><td>${t.worker}</td>` +
      `<td>${fmtNum(t.emitted)}</td><td>${fmtNum(t.executed)}</td>` +
      `<td>${fmtNum(t.emit_rate)}</td><td>${fmtNum(t.execute_rate)}</td>` +
      `<td>${t.latency_ms_p50 ?? "-"}</td><td>${t.latency_ms_p99 ?? "-"}</td>` +
      `<td style="color:${fillColor(fill)}">${Math.round(fill * 100)}%${t.throttled ? " ⏸" : ""}</td>` +
      `<td>${Math.round((t.cpu_busy || 0) * 100)}%</td><td>${t.errors}</td>` +
      `<td class="exc" title="${esc(e ? e.traceback || e.message : "")}">${esc(e ? e.message : "")}</td></tr>`;
  });
  setRows($("#tasks tbody"), rows);
}

function renderPace(health) {
  // a checkpoint's duration against the interval; what to change when they run back to
  // back or keep timing out (master/checkpoint_health.py)
  const el = $("#checkpoint-pace");
  if (!health || health.recent_duration_ms === null && !health.advice) {
    el.textContent = "";
    return;
  }
  let text = `every ${health.interval_ms} ms`;
  if (health.min_pause_ms) text += ` (min pause ${health.min_pause_ms} ms)`;
  if (health.recent_duration_ms !== null) {
    text += `; recent checkpoints take ${health.recent_duration_ms.toFixed(0)} ms`;
  }
  if (health.advice) text += ` — ${health.advice}`;
  el.textContent = text;
  el.dataset.pace = health.pace;
  el.className = health.advice ? "warning" : "muted";
}

function renderCheckpoints(status) {
  renderPace(status.checkpoint_health);
  const cks = (status.checkpoints || []).slice().reverse();
  const inflight = (status.inflight_checkpoints || []).map((id) =>
    `<tr class="inflight" data-checkpoint="${id}"><td>${id}</td><td>${status.generation}</td>` +
    `<td>in progress</td><td></td><td></td><td></td><td></td></tr>`);
  setRows($("#checkpoints tbody"), inflight.concat(cks.map((c) =>
    `<tr class="${esc(c.status)}" data-checkpoint="${c.id}" data-status="${esc(c.status)}"` +
    ` data-retained="${c.retained !== false}" title="${esc(c.error)}"><td>${c.id}</td>` +
    `<td>${c.generation}</td><td>${esc(c.status)}` +
    `${c.status === "completed" && c.retained === false ? " (deleted by retention)" : ""}</td>` +
    `<td>${c.duration_ms.toFixed(0)} ms</td><td>${fmtBytes(c.size_bytes)}</td>` +
    `<td>${c.alignment_ms.toFixed(1)} ms</td><td>${fmtTime(c.started_at)}</td></tr>`)));
}

function renderWorkers(status) {
  setRows($("#workers tbody"), (status.workers || []).map((w) =>
    `<tr class="${w.alive ? "alive" : "dead"}" data-worker="${w.id}" data-pid="${w.pid ?? ""}"` +
    ` data-alive="${w.alive}"><td>${w.id}</td><td>${w.alive ? "alive" : "lost"}</td>` +
    `<td>${w.pid ?? "-"}</td><td>${esc(w.code_version ?? "-")}</td><td>${fmtDur(w.uptime_s)}</td>` +
    `<td>${fmtBytes(w.rss_bytes)}</td><td>${w.cpu_percent === null ? "-" : w.cpu_percent.toFixed(0) + "%"}</td>` +
    `<td class="text">${w.tasks.join(", ")}</td></tr>`));
}

function renderLogs(status) {
  const ev = (status.events || []).slice().reverse();
  $("#events").innerHTML = ev.length ? ev.map((e) =>
    `<li class="${esc(e.kind)}" data-kind="${esc(e.kind)}" data-worker="${e.worker ?? ""}"` +
    ` data-pid="${e.pid ?? ""}">${fmtTime(e.time)} ${esc(e.message)}</li>`).join("")
    : `<li class="muted">none</li>`;
  const rec = (status.recoveries || []).slice().reverse();
  $("#recoveries").innerHTML = rec.length ? rec.map((r) =>
    `<li data-generation="${r.generation}">${fmtTime(r.time)} generation ${r.generation}: ` +
    `${esc(r.reason)} → checkpoint ${r.checkpoint ?? "none"} (${r.duration_ms} ms)</li>`).join("")
    : `<li class="muted">none</li>`;
  const errs = (status.errors || []).slice().reverse();
  $("#errors").innerHTML = errs.length ? errs.map((e) =>
    `<li title="${esc(e.traceback)}">${fmtTime(e.time)} task ${e.task} ${esc(e.component)}: ` +
    `${esc(e.message)}</li>`).join("") : `<li class="muted">none</li>`;
  setRows($("#config tbody"), Object.entries(status.config || {}).map(([k, v]) =>
    `<tr data-key="${esc(k)}"><td class="text">${esc(k)}</td><td>${esc(v)}</td></tr>`));
}

function renderSummary(status, metrics) {
  $("#topology-name").textContent = status.name;
  document.title = `${status.name} · jstormpy`;
  const st = $("#state");
  st.textContent = status.state;
  st.className = "pill " + status.state;
  $("#generation").textContent = status.generation;
  $("#restarts").textContent = status.restarts;
  $("#uptime").textContent = fmtDur(status.uptime_s);
  $("#guarantee").textContent = status.guarantee;
  renderHa(status);
  // what Flink's and Heron's UIs show: records in at the spouts, records out at the sinks
  // (a sum of every bolt's execute rate counts a record once per bolt it passes)
  const comps = metrics.components || {};
  const sum = (pick, key) => (status.components || []).filter(pick)
    .reduce((acc, c) => acc + ((comps[c.name] || {})[key] || 0), 0);
  const rateIn = sum((c) => c.kind === "spout", "emit_rate");
  const rateOut = sum((c) => c.is_sink, "execute_rate");
  for (const [id, v] of [["#rate-in", rateIn], ["#rate-out", rateOut]]) {
    $(id).textContent = `${fmtNum(v)}/s`;
    $(id).setAttribute("data-rate", String(v));
  }
}

// a --ha run: the epoch of this Topology Master, and who leads and stands by
function renderHa(status) {
  const ha = status.ha;
  $("#ha").hidden = !ha;
  if (!ha) return;
  $("#ha-epoch").textContent = (status.run || ha.run || {}).epoch ?? "-";
  $("#ha-leader").textContent = ha.leader || "none";
  $("#ha-standby").textContent = (ha.standby || []).join(", ") || "none";
  $("#ha-seen").textContent = ha.seen_at ?
    `seen in ZooKeeper ${fmtDur(Math.max(0, Date.now() / 1000 - ha.seen_at))} ago` : "";
}

// ---------------------------------------------------------------- history sparkline
async function refreshHistory() {
  try {
    const h = await (await fetch("api/history", { cache: "no-store" })).json();
    const pts = h.points || [];
    $("#history-note").textContent = `${pts.length} points, every ${h.interval_s} s`;
    const svg = $("#sparkline");
    svg.textContent = "";
    if (pts.length < 2) return;
    const w = svg.clientWidth || 600, hgt = 60;
    const t0 = pts[0].time, t1 = pts[pts.length - 1].time;
    const max = Math.max(1, ...pts.map((p) => p.topology.execute_rate || 0));
    const xy = pts.map((p) => `${((p.time - t0) / Math.max(1e-9, t1 - t0)) * (w - 4) + 2},` +
      `${hgt - 4 - ((p.topology.execute_rate || 0) / max) * (hgt - 8)}`);
    svg.appendChild(el("polyline", { points: xy.join(" ") }));
    svg.appendChild(el("text", { x: 4, y: 12, "font-size": 10, fill: "#607d8b" },
      `max ${fmtNum(max)}/s`));
  } catch (e) { /* next round */ }
}

// ---------------------------------------------------------------- loop
let polls = 0;
async function refresh() {
  try {
    const [status, metrics] = await Promise.all([
      fetch("api/status", { cache: "no-store" }).then((r) => r.json()),
      fetch("api/metrics", { cache: "no-store" }).then((r) => r.json()),
    ]);
    renderSummary(status, metrics);
    drawGraph(status.components || []);
    updateGraph(status.components || [], metrics);
    renderTasks(metrics, status);
    renderCheckpoints(status);
    renderWorkers(status);
    renderLogs(status);
    polls += 1;
    document.body.setAttribute("data-polls", String(polls));
    $("#conn").textContent = `updated ${new Date().toLocaleTimeString()}`;
  } catch (e) {
    $("#conn").textContent = "Topology Master unreachable: " + e;
  }
  if (polls % 10 === 1) refreshHistory();
}

refresh();
setInterval(refresh, POLL_MS);
