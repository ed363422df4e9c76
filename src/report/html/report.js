// SPDX-License-Identifier: MIT
// gpumemprof's HTML report: draws the data in <script id="data"> (written by
// src/report/html_report.cpp). Plain DOM, canvas and no library: the page must open from a
// file:// URL without network. Big inputs stay responsive: the timeline is drawn on a canvas
// from bucketed series, flame-graph boxes narrower than a few pixels are not created, tree
// children are built only when a node is opened, tables show the top rows.
"use strict";

const errorsBox = document.getElementById("errors");
function reportError(msg) {
  const li = document.createElement("li");
  li.textContent = String(msg);
  errorsBox.appendChild(li);
  errorsBox.hidden = false;
}
window.addEventListener("error", (e) => reportError(e.message + " (" + e.lineno + ")"));
const consoleError = console.error.bind(console);
console.error = (...args) => { reportError(args.join(" ")); consoleError(...args); };

const D = JSON.parse(document.getElementById("data").textContent);
const FR = D.frames;     // [function, file, line, module, hidden, kind?]
const SITES = D.sites;   // [frames root first, live, total, total_count, acquired, peak_live, peak_acquired, live_count, peak_count, owner, user frame]
const S_FRAMES = 0, S_LIVE = 1, S_TOTAL = 2, S_COUNT = 3, S_ACQ = 4, S_PEAK = 5, S_PEAK_ACQ = 6, S_LIVE_COUNT = 7, S_PEAK_COUNT = 8, S_OWNER = 9, S_USER = 10, S_KIND = 11;
const ACTION_ALLOC = 0, ACTION_FREE_REQUESTED = 1;

// ---- formatting ------------------------------------------------------------------------------
function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  if (attrs) for (const [k, v] of Object.entries(attrs)) {
    if (k === "class") e.className = v; else if (k === "text") e.textContent = v; else e.setAttribute(k, v);
  }
  for (const c of children) if (c !== null && c !== undefined) e.append(c);
  return e;
}
// CuPy's format (the line-profile tree, as in the .txt).
function cupy(b) {
  const units = ["", "K", "M", "G", "T", "P", "E"];
  let s = b;
  for (const u of units) { if (s < 1024) return s.toFixed(2) + u + "B"; s /= 1024; }
  return s.toFixed(2) + "ZB";
}
// PyTorch's format (tables).
function human(b) {
  if (b <= 1024) return b + " bytes";
  if (b <= 1048576) return (b / 1024).toFixed(2) + " KiB";
  if (b <= 1073741824) return (b / 1048576).toFixed(2) + " MiB";
  return (b / 1073741824).toFixed(2) + " GiB";
}
function seconds(ns) {
  const s = ns / 1e9;
  return s < 1 ? (s * 1000).toFixed(s < 0.01 ? 3 : 1) + " ms" : s.toFixed(3) + " s";
}
function frameLabel(i) {
  const f = FR[i];
  if (f[1]) return f[1] + ":" + f[2] + ":" + (f[0] || "??");
  return (f[3] || "??") + (f[0] ? ":" + f[0] : "");
}
function isPython(i) { return FR[i][5] === "python"; }
function siteStack(s, hide, max) {
  const frames = SITES[s][S_FRAMES];
  const out = [];
  for (let k = frames.length - 1; k >= 0 && out.length < max; --k)
    if (!(hide && FR[frames[k]][4])) out.push(frameLabel(frames[k]));
  return out;
}
// A site's frames as the tables list them: led by the innermost line of the user's own code
// (S_USER) when the frames shown do not start with it, as the text report does.
function siteLines(s, max) {
  const shown = siteStack(s, true, max);
  const u = SITES[s][S_USER];
  if (u === undefined || u < 0 || shown[0] === frameLabel(u)) return shown;
  return [frameLabel(u) + "   <- your code", "called into:"].concat(shown);
}
const tooltip = document.getElementById("tooltip");
function showTip(ev, text) {
  tooltip.textContent = text; tooltip.hidden = false;
  tooltip.style.left = Math.min(ev.clientX + 12, window.innerWidth - 320) + "px";
  tooltip.style.top = (ev.clientY + 14) + "px";
}
function hideTip() { tooltip.hidden = true; }

// ---- header ----------------------------------------------------------------------------------
function renderMeta() {
  const m = D.meta;
  document.getElementById("meta").textContent =
    m.exe + " (pid " + m.pid + " on " + m.host + "), profiled " + m.seconds_profiled.toFixed(2) + " s" +
    (m.alloc_conf ? ", GPUMEMPROF_ALLOC_CONF=" + m.alloc_conf : "");
}

// ---- timeline --------------------------------------------------------------------------------
const SERIES = [
  ["allocated", "allocated", "--alloc"], ["reserved", "reserved", "--reserved"],
  ["waiting", "freed, waiting for the device", "--waiting"], ["model_reserved", "PyTorch's allocator would reserve", "--model"]];
const css = getComputedStyle(document.documentElement);
let selectedTime = null;
const charts = [];

// A chart's canvas sized to its element at the device's pixel ratio, and cleared; sets the
// chart's plot area (c.w, c.h: room on the right for the byte labels, below for the times).
function freshCanvas(c) {
  const w = c.chart.clientWidth || 800, h = c.chart.clientHeight || 240;
  c.w = w - 70; c.h = h - 18;
  const dpr = window.devicePixelRatio || 1;
  c.canvas.width = w * dpr; c.canvas.height = h * dpr;
  c.canvas.style.width = w + "px"; c.canvas.style.height = h + "px";
  const g = c.canvas.getContext("2d");
  g.setTransform(dpr, 0, 0, dpr, 0, 0);
  g.clearRect(0, 0, w, h);
  return {g, w, h};
}

// Grid lines labelled in bytes (Y maps bytes to pixels), and times along the bottom of c's view.
function drawAxes(g, c, ymax, Y, h) {
  g.strokeStyle = "#dde"; g.fillStyle = "#667"; g.font = "11px sans-serif"; g.lineWidth = 1;
  for (let k = 0; k <= 4; ++k) {
    const v = ymax * k / 4, y = Y(v);
    g.beginPath(); g.moveTo(0, y); g.lineTo(c.w, y); g.stroke();
    g.fillText(human(Math.round(v)), c.w + 4, Math.max(y + 4, 10));
  }
  for (let k = 0; k <= 5; ++k) {
    const t = c.view[0] + (c.view[1] - c.view[0]) * k / 5;
    g.fillText(seconds(t), Math.min(c.x(t), c.w - 40), h - 4);
  }
}

class Timeline {
  constructor(dev, index) {
    this.dev = dev;
    this.s = dev.series;
    this.n = this.s.t0.length;
    const t1 = this.n ? this.s.t1[this.n - 1] : 1;
    // The axis starts shortly before the first allocation, not at process start: in a Python
    // program the imports before it would take most of the width.
    const first = this.n ? this.s.t0[0] : 0;
    this.tmin = Math.max(0, first - 0.02 * (t1 - first));
    this.tmax = Math.max(t1 + 0.02 * (t1 - first), this.tmin + 1);
    this.full = [this.tmin, this.tmax];
    this.show = { allocated: true, reserved: true, waiting: true, model_reserved: !!dev.model };
    this.box = el("div", { class: "device" });
    const title = "Device " + dev.device + (dev.context ? " (context " + (dev.context + 1) + ")" : "") +
      ": peak allocated " + human(dev.peak.allocated) + ", peak reserved " + human(dev.peak.reserved) +
      (this.s.bucket_ns ? " (" + this.s.changes + " changes, merged into buckets of " + seconds(this.s.bucket_ns) + ")" : "");
    const legend = el("div", { class: "legend" });
    for (const [key, label, color] of SERIES) {
      if (key === "model_reserved" && !dev.model) continue;
      const cb = el("input", { type: "checkbox" });
      cb.checked = this.show[key];
      cb.addEventListener("change", () => { this.show[key] = cb.checked; this.draw(); });
      legend.append(el("label", null, cb, el("span", { class: "swatch", style: "background:" + css.getPropertyValue(color) }), label));
    }
    this.chart = el("div", { class: "chart", "data-device": String(dev.device), "data-t-start": String(Math.round(this.tmin)) });
    this.canvas = el("canvas");
    this.chart.append(this.canvas);
    this.box.append(el("h3", { text: title }), legend, this.chart);
    this.bindMouse();
  }

  x(t) { return (t - this.view[0]) / (this.view[1] - this.view[0]) * this.w; }
  t(x) { return this.view[0] + x / this.w * (this.view[1] - this.view[0]); }

  draw() {
    const {g, h} = freshCanvas(this);
    if (!this.view) this.view = this.full.slice();
    let ymax = 1;
    for (const [key] of SERIES) if (this.show[key]) for (const v of this.s[key].max) ymax = Math.max(ymax, v);
    ymax *= 1.08;
    const Y = (v) => this.h - v / ymax * this.h;
    drawAxes(g, this, ymax, Y, h);
    let drawn = 0;
    for (const [key, , color] of SERIES) {
      if (!this.show[key]) continue;
      drawn = Math.max(drawn, this.drawSeries(g, this.s[key], Y, css.getPropertyValue(color)));
    }
    this.chart.dataset.points = String(drawn);
    this.chart.dataset.ymax = String(ymax);
    this.placeMarkers();
  }

  // Step line of one series; buckets sharing a pixel column are merged to their extremes.
  drawSeries(g, col, Y, color) {
    const s = this.s;
    g.strokeStyle = color; g.lineWidth = 1.5; g.beginPath();
    let prev = 0, started = false, count = 0;
    let px = -1, pmin = 0, pmax = 0, plast = 0, pfirst = 0;
    const flush = () => {
      if (px < 0) return;
      if (!started) { g.moveTo(0, Y(0)); started = true; }
      g.lineTo(px, Y(prev)); g.lineTo(px, Y(pmax)); g.lineTo(px, Y(pmin)); g.lineTo(px, Y(plast));
      prev = plast; ++count;
    };
    for (let i = 0; i < this.n; ++i) {
      if (s.t1[i] < this.view[0]) { prev = col.last[i]; continue; }
      if (s.t0[i] > this.view[1]) break;
      const x = Math.max(0, Math.round(this.x(s.t0[i])));
      if (x !== px) { flush(); px = x; pmin = col.min[i]; pmax = col.max[i]; }
      else { pmin = Math.min(pmin, col.min[i]); pmax = Math.max(pmax, col.max[i]); }
      plast = col.last[i];
    }
    flush();
    if (started) g.lineTo(this.w, Y(prev));
    g.stroke();
    return count;
  }

  placeMarkers() {
    for (const m of this.chart.querySelectorAll(".marker, .brush")) m.remove();
    const add = (cls, t, bytes, label, tip) => {
      if (t < this.view[0] || t > this.view[1]) return;
      const m = el("div", { class: "marker " + cls, "data-t": String(t), "data-bytes": String(bytes), title: tip });
      m.style.left = this.x(t) + "px";
      if (label) m.append(el("span", { text: label }));
      this.chart.append(m);
    };
    const p = this.dev.peak;
    if (p.allocated_t >= 0)
      add("peak", p.allocated_t, p.allocated, "peak " + human(p.allocated),
          "peak of allocated bytes: " + human(p.allocated) + " at " + seconds(p.allocated_t));
    for (const [kind, t, bytes] of this.dev.markers)
      add(kind, t, bytes, kind === "oom" ? "OOM" : "",
          kind === "oom" ? "out of memory: request of " + human(bytes) + " at " + seconds(t)
                         : "empty_cache released " + human(bytes) + " at " + seconds(t));
    if (selectedTime !== null) add("cursor", selectedTime, 0, "", "selected: " + seconds(selectedTime));
  }

  bindMouse() {
    let start = null, brush = null;
    const pos = (ev) => Math.max(0, Math.min(this.w, ev.clientX - this.chart.getBoundingClientRect().left));
    this.chart.addEventListener("mousedown", (ev) => {
      start = pos(ev);
      brush = el("div", { class: "brush" });
      brush.style.left = start + "px"; brush.style.width = "0px";
      this.chart.append(brush);
    });
    this.chart.addEventListener("mousemove", (ev) => {
      const x = pos(ev);
      if (start !== null && brush) {
        brush.style.left = Math.min(start, x) + "px"; brush.style.width = Math.abs(x - start) + "px";
      }
      showTip(ev, seconds(this.t(x)) + "\n" + this.valuesAt(this.t(x)));
    });
    this.chart.addEventListener("mouseleave", hideTip);
    window.addEventListener("mouseup", (ev) => {
      if (start === null) return;
      const x = pos(ev);
      if (brush) brush.remove();
      if (Math.abs(x - start) > 4) {
        const a = this.t(Math.min(start, x)), b = this.t(Math.max(start, x));
        this.view = [a, b];
        this.draw();
      } else {
        selectTime(this.t(x));
      }
      start = null; brush = null;
    });
    this.chart.addEventListener("dblclick", () => { this.view = this.full.slice(); this.draw(); });
  }

  valuesAt(t) {
    const s = this.s;
    let lo = 0, hi = this.n - 1, i = -1;
    while (lo <= hi) { const mid = (lo + hi) >> 1; if (s.t0[mid] <= t) { i = mid; lo = mid + 1; } else hi = mid - 1; }
    if (i < 0) return "nothing allocated yet";
    return SERIES.filter(([k]) => this.show[k]).map(([k, label]) => label + ": " + human(s[k].last[i])).join("\n");
  }
}

function renderTimelines() {
  const box = document.getElementById("timelines");
  if (!D.devices.length) { box.append(el("p", { class: "note", text: "No device memory was allocated through the pool." })); return; }
  D.devices.forEach((dev, i) => { const c = new Timeline(dev, i); charts.push(c); box.append(c.box); });
  for (const c of charts) c.draw();
  window.addEventListener("resize", () => { for (const c of charts) c.draw(); });
}

// ---- stacked views: PyTorch's memory by kind, the driver's used figure by bucket ---------------
// Each point is one moment's split, holding until the next point (a step chart); the layers are
// stacked in the given order, bottom first.
const KIND_COLORS = {
  "parameters": "#2f6fd6", "gradients": "#d6852f", "optimizer state": "#8a5cc2", "activations": "#2a9d6a",
  "temporaries": "#c9b037", "private pools": "#d62f7a", "library workspaces": "#5a8a99", "other": "#999"};
const BUCKET_PALETTE = ["#2f6fd6", "#9cbcf0", "#d62f7a", "#d6852f", "#8a5cc2", "#2a9d6a", "#c9b037", "#5a8a99", "#7a5230"];

class StackedChart {
  // t: times (ns), layers: [{name, values, color}], line: {name, values} drawn over the stack.
  constructor(kind, device, title, t, layers, line) {
    this.t = t; this.layers = layers; this.line = line || null;
    this.n = t.length;
    const first = this.n ? t[0] : 0, last = this.n ? t[this.n - 1] : 1;
    this.full = [Math.max(0, first - 0.02 * (last - first)), Math.max(last + 0.02 * (last - first), first + 1)];
    this.view = this.full.slice();
    this.totals = t.map((_, i) => layers.reduce((a, l) => a + Math.max(0, l.values[i]), 0));
    let peak = 0;
    for (let i = 1; i < this.n; ++i) if (this.totals[i] > this.totals[peak]) peak = i;
    this.peak = peak;
    this.box = el("div", { class: "device" });
    const legend = el("div", { class: "legend" });
    for (const l of layers) {
      const v = this.n ? l.values[peak] : 0;
      legend.append(el("label", { class: "layer", "data-name": l.name, "data-bytes": String(v) },
        el("span", { class: "swatch", style: "background:" + l.color }), l.name + " " + human(Math.max(0, v))));
    }
    if (this.line) legend.append(el("label", { class: "layer line" }, el("span", { class: "swatch line" }), this.line.name));
    this.chart = el("div", { class: "stacked-chart", "data-kind": kind, "data-device": String(device),
                             "data-layers": String(layers.filter((l) => l.values.some((v) => v > 0)).length),
                             "data-peak-total": String(this.n ? this.totals[peak] : 0),
                             "data-peak-t": String(this.n ? t[peak] : -1) });
    this.canvas = el("canvas");
    this.chart.append(this.canvas);
    this.box.append(el("h3", { text: title + (this.n ? ": at most " + human(this.totals[peak]) + " at " + seconds(t[peak]) + ", split as the legend shows" : "") }),
      legend, this.chart);
    this.bindMouse();
  }

  x(t) { return (t - this.view[0]) / (this.view[1] - this.view[0]) * this.w; }
  tAt(x) { return this.view[0] + x / this.w * (this.view[1] - this.view[0]); }

  draw() {
    const {g, h} = freshCanvas(this);
    let ymax = 1;
    for (let i = 0; i < this.n; ++i) {
      ymax = Math.max(ymax, this.totals[i]);
      if (this.line) ymax = Math.max(ymax, this.line.values[i]);
    }
    ymax *= 1.08;
    const Y = (v) => this.h - v / ymax * this.h;
    drawAxes(g, this, ymax, Y, h);
    // The points in view (and the one before it, which holds at its left edge).
    let lo = 0;
    while (lo + 1 < this.n && this.t[lo + 1] <= this.view[0]) ++lo;
    let hi = lo;
    while (hi + 1 < this.n && this.t[hi + 1] <= this.view[1]) ++hi;
    const xs = [];
    for (let i = lo; i <= hi; ++i) xs.push(Math.max(0, Math.min(this.w, this.x(this.t[i]))));
    const xEnd = (k) => k + 1 < xs.length ? xs[k + 1] : this.w;
    const base = new Array(xs.length).fill(0);
    let drawn = 0;
    for (const l of this.layers) {
      if (!this.n) break;
      const top = base.map((b, k) => b + Math.max(0, l.values[lo + k]));
      g.fillStyle = l.color; g.beginPath();
      g.moveTo(xs[0], Y(base[0]));
      for (let k = 0; k < xs.length; ++k) { g.lineTo(xs[k], Y(top[k])); g.lineTo(xEnd(k), Y(top[k])); }
      for (let k = xs.length - 1; k >= 0; --k) { g.lineTo(xEnd(k), Y(base[k])); g.lineTo(xs[k], Y(base[k])); }
      g.closePath(); g.fill();
      for (let k = 0; k < xs.length; ++k) base[k] = top[k];
      ++drawn;
    }
    if (this.line && this.n) {
      g.strokeStyle = "#1d2330"; g.lineWidth = 1.5; g.beginPath();
      for (let k = 0; k < xs.length; ++k) {
        const y = Y(this.line.values[lo + k]);
        if (k === 0) g.moveTo(xs[k], y); else g.lineTo(xs[k], y);
        g.lineTo(xEnd(k), y);
      }
      g.stroke();
    }
    this.chart.dataset.points = String(this.n ? xs.length : 0);
    this.chart.dataset.drawn = String(drawn);
    this.chart.dataset.ymax = String(ymax);
  }

  valuesAt(t) {
    let i = -1;
    for (let k = 0; k < this.n && this.t[k] <= t; ++k) i = k;
    if (i < 0) return "nothing yet";
    const rows = this.layers.filter((l) => l.values[i] !== 0).map((l) => l.name + ": " + human(l.values[i]));
    if (this.line) rows.unshift(this.line.name + ": " + human(this.line.values[i]));
    return rows.join("\n");
  }

  bindMouse() {
    let start = null;
    const pos = (ev) => Math.max(0, Math.min(this.w, ev.clientX - this.chart.getBoundingClientRect().left));
    this.chart.addEventListener("mousedown", (ev) => { start = pos(ev); });
    this.chart.addEventListener("mousemove", (ev) => { const t = this.tAt(pos(ev)); showTip(ev, seconds(t) + "\n" + this.valuesAt(t)); });
    this.chart.addEventListener("mouseleave", hideTip);
    window.addEventListener("mouseup", (ev) => {
      if (start === null) return;
      const x = pos(ev);
      if (Math.abs(x - start) > 4) { this.view = [this.tAt(Math.min(start, x)), this.tAt(Math.max(start, x))]; this.draw(); }
      start = null;
    });
    this.chart.addEventListener("dblclick", () => { this.view = this.full.slice(); this.draw(); });
  }
}

const stackedCharts = [];

function renderKinds() {
  const box = document.getElementById("kinds");
  const devs = D.devices.filter((d) => d.kinds && d.kinds.t.length);
  if (!devs.length) {
    box.append(el("p", { class: "note", text: "Only PyTorch's blocks are split by kind (GPUMEMPROF_TORCH attached): none were seen." }));
    return;
  }
  for (const dev of devs) {
    const k = dev.kinds;
    const layers = k.names.map((name, j) => ({ name, values: k.bytes[j], color: KIND_COLORS[name] || "#777" }));
    const c = new StackedChart("kinds", dev.device, "Device " + dev.device + ", PyTorch's live blocks by kind", k.t, layers, null);
    stackedCharts.push(c); box.append(c.box);
  }
}

function renderAccounting() {
  const box = document.getElementById("accounting");
  const acc = (D.accounting || []).filter((a) => a.t.length);
  if (!acc.length) { box.append(el("p", { class: "note", text: "No reading of the driver's used figure was taken." })); return; }
  for (const a of acc) {
    const layers = a.names.map((name, j) => ({ name, values: a.bytes[j], color: BUCKET_PALETTE[j % BUCKET_PALETTE.length] }));
    // What the buckets do not explain, on top: the stack then reaches the driver's figure.
    const rest = a.t.map((_, i) => a.used[i] - layers.reduce((s, l) => s + l.values[i], 0));
    layers.push({ name: "unexplained", values: rest, color: "#e4e4ea" });
    const c = new StackedChart("accounting", a.device, "Device " + a.device + ", the driver's used figure (of " + human(a.total) + ") by bucket",
      a.t, layers, { name: "the driver's used figure", values: a.used });
    stackedCharts.push(c); box.append(c.box);
  }
}

function renderStacked() {
  renderKinds();
  renderAccounting();
  for (const c of stackedCharts) c.draw();
  window.addEventListener("resize", () => { for (const c of stackedCharts) c.draw(); });
}

// ---- live at a time: the latest events replayed backwards from what is live at exit ------------
function liveAt(t) {
  const live = new Map();
  let complete = true;
  for (const dev of D.devices) {
    for (const [site, bytes] of dev.live_end) live.set(site, (live.get(site) || 0) + bytes);
    const e = dev.events;
    let i = e.t.length - 1;
    for (; i >= 0 && e.t[i] > t; --i) {
      const a = e.action[i];
      if (a === ACTION_ALLOC) live.set(e.site[i], (live.get(e.site[i]) || 0) - e.bytes[i]);
      else if (a === ACTION_FREE_REQUESTED) live.set(e.site[i], (live.get(e.site[i]) || 0) + e.bytes[i]);
    }
    if (e.overwritten > 0 && (e.t.length === 0 || t < e.t[0])) complete = false;
  }
  return { live, complete };
}

function selectTime(t) {
  selectedTime = t;
  for (const c of charts) c.placeMarkers();
  const { live, complete } = liveAt(t);
  document.getElementById("live-time").textContent = seconds(t);
  const rows = [...live.entries()].filter(([, b]) => b > 0).sort((a, b) => b[1] - a[1]);
  const total = rows.reduce((a, [, b]) => a + b, 0);
  const box = document.getElementById("live");
  box.replaceChildren();
  box.dataset.t = String(t);
  box.dataset.total = String(total);
  if (!complete) box.append(el("p", { class: "note", text: "Older events were not kept (the latest are): sites that allocated before them may be missing." }));
  box.append(siteTable(rows.slice(0, 50).map(([s, b]) => [s - 1, b]), "live", total));
}

// ---- tables ------------------------------------------------------------------------------------
// rows: [site index, bytes, blocks?]; the blocks column only when the rows carry counts.
function siteTable(rows, what, total) {
  const counts = rows.length > 0 && rows[0].length > 2;
  // Each site's kind of memory (PyTorch's blocks, where its allocator is attached): a column
  // when any row has one.
  const kindOf = (s) => (s >= 0 && SITES[s][S_KIND]) || "";
  const kinds = rows.some(([s]) => kindOf(s));
  const tb = el("tbody");
  for (const [s, bytes, extra] of rows) {
    const frames = s >= 0 ? siteLines(s, 6).join("\n") : "[no stack captured]";
    tb.append(el("tr", { "data-site": String(s), "data-bytes": String(bytes) },
      el("td", { class: "num", text: human(bytes) }),
      el("td", { class: "num", text: total ? (100 * bytes / total).toFixed(1) + "%" : "" }),
      counts ? el("td", { class: "num", text: String(extra) }) : null,
      kinds ? el("td", { class: "kind", text: kindOf(s) }) : null,
      el("td", { class: "frames", text: frames })));
  }
  return el("table", null, el("thead", null, el("tr", null, el("th", { class: "num", text: what }),
    el("th", { class: "num", text: "share" }), counts ? el("th", { class: "num", text: "blocks" }) : null,
    kinds ? el("th", { text: "kind of memory" }) : null,
    el("th", { text: "call site (innermost frames that are not allocator plumbing)" }))), tb);
}

function topTable(id, col, countCol, what, n) {
  const rows = SITES.map((s, i) => [i, s[col], s[countCol]]).filter((r) => r[1] > 0).sort((a, b) => b[1] - a[1]);
  const total = rows.reduce((a, r) => a + r[1], 0);
  const box = document.getElementById(id);
  if (!rows.length) { box.append(el("p", { class: "note", text: "none" })); return; }
  box.append(siteTable(rows.slice(0, n), what, total));
  if (rows.length > n) box.append(el("p", { class: "note", text: (rows.length - n) + " more sites" }));
}

function renderOoms() {
  const box = document.getElementById("ooms");
  if (!D.ooms.length) { box.append(el("p", { class: "note", text: "none" })); return; }
  D.ooms.forEach((o, k) => {
    const stack = [];
    for (let i = o.frames.length - 1; i >= 0 && stack.length < 12; --i) if (!FR[o.frames[i]][4]) stack.push(frameLabel(o.frames[i]));
    const held = [];
    if (o.accounting) {
      const a = o.accounting;
      held.push(el("p", { text: "The driver counted " + human(a.used) + " used of " + human(a.total) + ":" }),
        el("table", { class: "kv oom-accounting" }, el("tbody", null,
          ...a.buckets.concat([["unexplained", a.unexplained]]).map(([name, bytes]) =>
            el("tr", { "data-name": name, "data-bytes": String(bytes) }, el("td", { text: name }), el("td", { class: "num", text: human(bytes) }))))));
    }
    if (o.kinds) {
      held.push(el("p", { text: "PyTorch's live blocks by kind:" }),
        el("table", { class: "kv oom-kinds" }, el("tbody", null,
          ...o.kinds.filter(([name, bytes]) => bytes !== 0 || name === "other").map(([name, bytes]) =>
            el("tr", { "data-name": name, "data-bytes": String(bytes) }, el("td", { text: name }), el("td", { class: "num", text: human(bytes) }))))));
    }
    box.append(el("div", { class: "oom", "data-requested": String(o.requested) },
      el("h3", { text: "OOM #" + (k + 1) + " on device " + o.device }),
      el("p", { text: o.message }),
      ...held,
      el("p", null, el("b", { text: "suggestion: " }), o.suggestion),
      el("div", { class: "frames", text: stack.join("\n") || "[no stack captured]" })));
  });
}

function kvTable(pairs) {
  return el("table", { class: "kv" }, el("tbody", null, ...pairs.map(([k, v]) => el("tr", null, el("td", { text: k }), el("td", { class: "num", text: v })))));
}

function renderSummary() {
  const box = document.getElementById("summary");
  for (const dev of D.devices) {
    const m = dev.memory_stats, r = dev.at_reserved_peak;
    const pairs = [
      ["peak allocated", human(m["allocated_bytes.all.peak"])],
      ["peak reserved", human(m["reserved_bytes.all.peak"])],
      ["peak requested", human(m["requested_bytes.all.peak"])],
      ["fragmentation when reserved peaked: reserved but not allocated", human(r.reserved - r.allocated)],
      ["... of which free inside split segments", human(r.inactive_split_bytes)],
      ["allocations / frees", m["allocation.all.allocated"] + " / " + m["allocation.all.freed"]],
      ["device allocations / frees (segments)", m["num_device_alloc"] + " / " + m["num_device_free"]],
      ["OOMs, retries", m["num_ooms"] + ", " + m["num_alloc_retries"]],
      ["device capacity", human(dev.capacity)]];
    if (dev.model) {
      const mm = dev.model.memory_stats, mr = dev.model.at_reserved_peak;
      pairs.push(["PyTorch's caching allocator on the same requests: peak reserved", human(mm["reserved_bytes.all.peak"])],
        ["... its fragmentation when reserved peaked", human(mr.reserved - mr.allocated)]);
    }
    box.append(el("h3", { text: "Device " + dev.device + (dev.context ? " (context " + (dev.context + 1) + ")" : "") }), kvTable(pairs));
  }
  const c = D.capture;
  document.getElementById("cost").append(kvTable([
    ["stacks captured", String(c.captures)], ["frames kept", String(c.frames)],
    ["hits in the per-thread stack cache", String(c.cache_hits)],
    ["time unwinding", (c.unwind_seconds * 1000).toFixed(2) + " ms"],
    ["time interning", (c.intern_seconds * 1000).toFixed(2) + " ms"],
    ["per stack", c.captures ? ((c.unwind_seconds + c.intern_seconds) / c.captures * 1e9).toFixed(0) + " ns" : "-"],
    ["of the time unwinding, learning how to unwind " + (c.unwind_learnt || 0) + " new code addresses (each once)",
      ((c.learn_seconds || 0) * 1000).toFixed(2) + " ms"],
    ["per stack without that", c.captures ?
      ((c.unwind_seconds + c.intern_seconds - (c.learn_seconds || 0)) / c.captures * 1e9).toFixed(0) + " ns" : "-"],
    ["distinct call stacks", String(c.unique_sites)]]));
}

// ---- call trees (flame graph and line profile share them) ----------------------------------------
// A node: {f: frame index (-1 root), v: bytes, a: acquired, kids: Map(frame -> node)}.
function buildTree(col, acqCol, hide) {
  const root = { f: -1, v: 0, a: 0, kids: new Map() };
  for (const s of SITES) {
    const v = s[col], a = acqCol >= 0 ? s[acqCol] : 0;
    if (v <= 0 && a <= 0) continue;
    let n = root;
    n.v += v; n.a += a;
    for (const f of s[S_FRAMES]) {
      if (hide && FR[f][4]) continue;
      let k = n.kids.get(f);
      if (!k) { k = { f, v: 0, a: 0, kids: new Map() }; n.kids.set(f, k); }
      k.v += v; k.a += a;
      n = k;
    }
  }
  return root;
}

// ---- flame graph (icicle: root on top) --------------------------------------------------------
const flame = { root: null, focus: null, path: [] };
const FLAME_ROW = 18, FLAME_MIN_PX = 2;

function flameColor(f) {
  if (isPython(f)) return "hsl(200,60%,72%)";
  let h = 0;
  const name = FR[f][0] || FR[f][3] || "";
  for (let i = 0; i < name.length; ++i) h = (h * 31 + name.charCodeAt(i)) >>> 0;
  return "hsl(" + (10 + h % 45) + "," + (55 + h % 30) + "%," + (62 + h % 12) + "%)";
}

function renderFlame() {
  const metric = document.getElementById("flame-metric").value;
  const col = metric === "peak" ? S_PEAK : metric === "total" ? S_TOTAL : S_LIVE;
  flame.root = buildTree(col, -1, document.getElementById("flame-hide").checked);
  flame.focus = flame.root; flame.path = [];
  drawFlame();
}

function drawFlame() {
  const box = document.getElementById("flame");
  box.replaceChildren();
  const W = box.clientWidth || 1000;
  const total = flame.root.v;
  let maxDepth = 0, shown = 0, skipped = 0;
  const frag = document.createDocumentFragment();
  const query = document.getElementById("flame-search").value.toLowerCase();
  let matched = 0;
  const add = (node, depth, x, w, label, title) => {
    const d = el("div", { class: "fg", "data-bytes": String(node.v), "data-label": label, title });
    d.style.left = x + "px"; d.style.top = depth * FLAME_ROW + "px"; d.style.width = w + "px";
    d.style.background = node.f < 0 ? "#ccd" : flameColor(node.f);
    if (node.f >= 0 && isPython(node.f)) d.classList.add("python");
    d.textContent = label;
    if (query && label.toLowerCase().includes(query)) d.classList.add("match");
    d.addEventListener("click", () => { zoomFlame(node); });
    frag.append(d);
    ++shown;
    maxDepth = Math.max(maxDepth, depth);
  };
  const tip = (node, label) => label + "\n" + human(node.v) + " (" + node.v + " bytes), " +
    (total ? (100 * node.v / total).toFixed(2) : "0") + "% of all";
  // The focused node's ancestors span the full width.
  let depth = 0;
  for (const a of flame.path) { const l = a.f < 0 ? "all" : frameLabel(a.f); add(a, depth++, 0, W, l, tip(a, l)); }
  const walk = (node, d, x, w) => {
    const l = node.f < 0 ? "all" : frameLabel(node.f);
    add(node, d, x, w, l, tip(node, l));
    let cx = x;
    for (const k of [...node.kids.values()].sort((p, q) => q.v - p.v)) {
      const kw = node.v > 0 ? w * k.v / node.v : 0;
      if (kw < FLAME_MIN_PX) { skipped += 1; continue; }
      walk(k, d + 1, cx, kw);
      cx += kw;
    }
  };
  if (flame.focus.v > 0) walk(flame.focus, depth, 0, W);
  if (query) {
    // Bytes under frames that match, each stack counted once.
    for (const s of SITES) {
      const col = document.getElementById("flame-metric").value;
      const v = col === "peak" ? s[S_PEAK] : col === "total" ? s[S_TOTAL] : s[S_LIVE];
      if (v > 0 && s[S_FRAMES].some((f) => frameLabel(f).toLowerCase().includes(query))) matched += v;
    }
  }
  box.append(frag);
  box.style.height = (maxDepth + 1) * FLAME_ROW + 4 + "px";
  box.dataset.total = String(total);
  box.dataset.boxes = String(shown);
  document.getElementById("flame-info").textContent = (total ? human(total) + " in all" : "nothing to show") +
    (skipped ? ", " + skipped + " narrow boxes left out" : "") +
    (query ? ", matching '" + query + "': " + human(matched) + " (" + (total ? (100 * matched / total).toFixed(1) : 0) + "%)" : "");
}

function zoomFlame(node) {
  if (node === flame.focus) return;
  const path = [];
  const find = (n, trail) => {
    if (n === node) { path.push(...trail); return true; }
    for (const k of n.kids.values()) if (find(k, trail.concat([n]))) return true;
    return false;
  };
  find(flame.root, []);
  flame.path = path; flame.focus = node;
  drawFlame();
}

// ---- line-profile trees (CuPy LineProfileHook's lines; children built when opened) ----------------
function renderTree(id, col, acqCol) {
  const root = buildTree(col, acqCol, false);
  const ul = document.getElementById(id);
  ul.replaceChildren(treeItem(root, "_root"));
}

function treeItem(node, label) {
  const kids = [...node.kids.values()].sort((a, b) => b.v - a.v);
  const li = el("li", { class: kids.length ? "" : "leaf" });
  const text = (label || frameLabel(node.f)) + " (" + cupy(node.v) + ", " + cupy(node.a) + ")";
  const span = el("span", { class: "node", text, "data-bytes": String(node.v), "data-acquired": String(node.a) });
  li.append(span);
  let built = false;
  span.addEventListener("click", () => {
    if (!kids.length) return;
    if (!built) {
      const ul = el("ul");
      for (const k of kids) ul.append(treeItem(k, null));
      li.append(ul);
      built = true;
    }
    li.classList.toggle("open");
    li.lastChild.hidden = !li.classList.contains("open");
  });
  return li;
}

// ---- start ------------------------------------------------------------------------------------
function leaks() {
  // The program's own blocks; those a library keeps for the process (PyTorch's cache, cuBLAS's
  // workspaces: S_OWNER) are no leaks of its code, and are summed apart.
  const live = SITES.map((s, i) => [i, s[S_LIVE], s[S_LIVE_COUNT], s[S_OWNER] || ""]).filter((r) => r[1] > 0);
  const rows = live.filter((r) => !r[3]).sort((a, b) => b[1] - a[1]).map((r) => r.slice(0, 3));
  const box = document.getElementById("leaks");
  // Written while the program ran (gpumemprof_dump, the dump signal): it may still free them.
  const midRun = !!D.meta.mid_run;
  if (midRun) {
    box.previousElementSibling.textContent = "Live blocks now, the program still running";
    box.append(el("p", { class: "note", text: "This report was asked for while the program ran: these are its " +
      "live blocks then, which it may still free. The report at exit lists its leaks." }));
  }
  if (!rows.length) box.append(el("p", { class: "note", text: midRun ? "none: the program's code held no block" :
    "none: every block of the program's was freed" }));
  else box.append(siteTable(rows.slice(0, 100), midRun ? "live" : "leaked", rows.reduce((a, r) => a + r[1], 0)));
  const kept = new Map();
  for (const r of live.filter((x) => x[3])) {
    const k = kept.get(r[3]) || [0, 0];
    kept.set(r[3], [k[0] + r[1], k[1] + r[2]]);
  }
  for (const [lib, [bytes, count]] of kept)
    box.append(el("p", { class: "note kept", text: "kept by " + lib + ": " + human(bytes) + " in " + count +
      (count === 1 ? " block" : " blocks") + ", its own memory, not a leak of the program's code" }));
}

// Deep links: #t=<ns> selects a time; #expand=<levels> opens the line-profile trees that deep;
// #view=<section id> shows that section alone (e.g. #view=sec-flame).
function applyHash() {
  const params = new URLSearchParams(location.hash.slice(1));
  if (params.has("view")) {
    for (const s of document.querySelectorAll("main > section")) s.hidden = s.id !== params.get("view");
    if (params.get("view") === "sec-flame") drawFlame(); // its width may have changed
  }
  if (params.has("t")) selectTime(Number(params.get("t")));
  const levels = Number(params.get("expand") || 0);
  for (let level = 0; level < levels; ++level)
    for (const span of document.querySelectorAll(".tree li:not(.open):not(.leaf) > .node"))
      if (span.offsetParent !== null) span.click(); // visible: its parents are open
}

function main() {
  renderMeta();
  renderTimelines();
  renderStacked();
  const first = D.devices.find((d) => d.peak.allocated_t >= 0);
  if (first) selectTime(first.peak.allocated_t);
  for (const id of ["flame-metric", "flame-hide"]) document.getElementById(id).addEventListener("change", renderFlame);
  document.getElementById("flame-search").addEventListener("input", drawFlame);
  document.getElementById("flame-reset").addEventListener("click", () => zoomFlame(flame.root));
  renderFlame();
  renderTree("tree-cumulative", S_TOTAL, S_ACQ);
  renderTree("tree-peak", S_PEAK, S_PEAK_ACQ);
  topTable("top-peak", S_PEAK, S_PEAK_COUNT, "live at peak", 30);
  topTable("top-total", S_TOTAL, S_COUNT, "total", 30);
  leaks();
  renderOoms();
  renderSummary();
  applyHash();
  window.addEventListener("hashchange", applyHash);
  document.body.dataset.ready = "1";
  document.body.dataset.loadMs = performance.now().toFixed(0); // since navigation began (bench/html_load.py)
}

try { main(); } catch (e) { reportError(e && e.stack ? e.stack : e); }
