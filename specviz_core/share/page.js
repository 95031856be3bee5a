"use strict";
// SpecViz's shared page: draws what the core computed (specviz_core/share/payload.py); decides nothing itself.
(function () {
  const D = JSON.parse(document.getElementById("specviz-data").textContent);
  if (D.format !== 1) {
    document.body.textContent = `This page was written by a SpecViz whose data (format ${D.format}) this page ` +
      "cannot read.";
    return;
  }
  const NS = "http://www.w3.org/2000/svg";
  const C = D.colors;
  const $ = (id) => document.getElementById(id);
  const S = D.session;
  let at = 0, timer = null;

  function el(tag, attrs, parent, text) {
    const e = document.createElementNS(NS, tag);
    for (const k in attrs) e.setAttribute(k, attrs[k]);
    if (text !== undefined) e.textContent = text;
    if (parent) parent.appendChild(e);
    return e;
  }
  function svg(box, w, h, most, x = 0, y = 0) {
    // Scaled to fit the panel, but never past ``most`` times its natural size (a 3-node tree stays readable, not huge).
    box.textContent = "";
    const s = el("svg", {viewBox: `${x} ${y} ${w} ${h}`, preserveAspectRatio: "xMidYMid meet"}, box);
    if (most) {
      const k = Math.min(most, box.clientWidth / w, box.clientHeight / h);
      if (k > 0) { s.style.width = `${w * k}px`; s.style.height = `${h * k}px`; s.style.position = "static"; }
    }
    return s;
  }
  const colour = (source) => C.sources[source] || C.fallback;
  const tokenText = (i) => (i === null || i === undefined) ? "" : D.tokens[i];
  const visible = (s) => s.replace(/ /g, "␣").replace(/\n/g, "↵").replace(/\t/g, "⇥");

  // -- the header and legend ----------------------------------------------------------------------------------
  $("method").textContent = S.method;
  $("facts").textContent = ` · ${S.model} · ${S.device} · session ${S.id} · ${S.n_cycles} cycles, ${S.n_tokens} tokens` +
    (S.damaged.length ? ` · ${S.damaged.length} damaged cycles left out (${S.damaged.slice(0, 5).join(", ")})` : "");
  $("headline").textContent = D.headline.short;
  $("headline-detail").textContent = D.headline.text;
  const used = new Set();
  D.cycles.forEach((c) => c.tree.boxes.forEach((b) => used.add(b.source)));
  const legend = $("legend");
  for (const s of Object.keys(C.sources)) {
    if (!used.has(s) || s === "prompt") continue;
    legend.insertAdjacentHTML("beforeend", `<span><i style="background:${colour(s)}"></i>${C.labels[s] || s}</span>`);
  }
  legend.insertAdjacentHTML("beforeend", `<span><i style="border:2px dashed ${C.gated}"></i>gated / cut</span>` +
    `<span><i style="border:3px solid ${C.accepted}"></i>accepted path</span>`);

  // -- the tree -----------------------------------------------------------------------------------------------
  //: Labels drawn smaller than this (px) are not read: a tree that small is framed by its accepted path instead.
  const LEGIBLE_PX = 9;
  function treeFrame(t, box) {
    // The whole tree where its labels stay legible; else, as the window's presentation mode does, the root, the
    // accepted path and the bonus token, as wide as they are and as tall as the panel's shape then allows (the
    // rest of the tree runs off the sides, its edges still drawn).
    const k = Math.min(box.clientWidth / t.w, box.clientHeight / t.h);
    if (!(k * 12 < LEGIBLE_PX) || !box.clientWidth) return null;
    const path = t.boxes.filter(onPath);
    const x0 = Math.min(...path.map((b) => b.x)) - 12, x1 = Math.max(...path.map((b) => b.x + b.w)) + 12;
    const y0 = Math.min(...path.map((b) => b.y)), y1 = Math.max(...path.map((b) => b.y)) + t.box_h;
    const w = x1 - x0, h = Math.max(y1 - y0 + 24, w * box.clientHeight / box.clientWidth);
    if (w >= t.w * 0.9) return null;  // the path is the tree's whole width: nothing to gain
    return {x: x0, y: (y0 + y1) / 2 - h / 2, w: w, h: h};
  }
  const onPath = (b) => b.kind === "accepted" || b.kind === "bonus";
  function drawTree(c) {
    const t = c.tree, box = $("tree"), f = treeFrame(t, box);
    const s = f ? svg(box, f.w, f.h, 0, f.x, f.y) : svg(box, t.w, t.h, 1.6);
    box.dataset.framed = f ? "path" : "";
    s.setAttribute("font-size", "12");
    const byId = new Map(t.boxes.map((b) => [b.id, b]));
    for (const [p, ch] of t.edges) {
      const a = byId.get(p), b = byId.get(ch);
      const x0 = a.x + a.w, y0 = a.y + t.box_h / 2, x1 = b.x, y1 = b.y + t.box_h / 2, mx = (x0 + x1) / 2;
      const path = onPath(a) && onPath(b);
      const dashed = b.kind === "gated" || b.kind === "marker";
      el("path", {d: `M${x0},${y0} C${mx},${y0} ${mx},${y1} ${x1},${y1}`, fill: "none",
        stroke: path ? C.accepted : C.gated, "stroke-width": path ? 3 : 1,
        "stroke-dasharray": dashed ? "4 3" : "none"}, s);
    }
    for (const b of t.boxes) {
      const g = el("g", {"data-node": b.id, "data-kind": b.kind, class: "node"}, s);
      const hollow = b.kind === "gated" || b.kind === "marker";
      const fill = b.kind === "bonus" ? C.accepted : hollow ? "none" : colour(b.source);
      const stroke = b.kind === "accepted" || b.kind === "bonus" ? C.accepted : hollow ? C.gated : fill;
      el("rect", {x: b.x, y: b.y, width: b.w, height: t.box_h, rx: t.box_h / 3, fill: fill, stroke: stroke,
        "stroke-width": b.kind === "accepted" || b.kind === "bonus" ? 2.5 : 1,
        "stroke-dasharray": hollow ? "4 3" : "none"}, g);
      el("text", {x: b.x + b.w / 2, y: b.y + t.box_h / 2, dy: "0.35em", "text-anchor": "middle",
        fill: hollow ? C.gated : "#ffffff"}, g, b.label);
      let tip = b.kind === "marker" ? b.label : `node ${b.id} · ${C.labels[b.source] || b.source} · ${b.kind}`;
      if (b.depth !== undefined) tip += ` · depth ${b.depth}`;
      if (b.wanted !== undefined) tip += `\nthe target wanted next: ${JSON.stringify(tokenText(b.wanted))}`;
      if (b.p !== undefined) tip += ` · p(this token) ${b.p}`;
      el("title", {}, g, tip);
    }
  }

  // -- the mask -----------------------------------------------------------------------------------------------
  function maskBits(c) {
    const bytes = atob(c.mask), n = c.n, bits = [];
    for (let k = 0; k < n * n; k++) bits.push((bytes.charCodeAt(k >> 3) >> (7 - (k & 7))) & 1);
    return bits;
  }
  function drawMask(c) {
    const n = c.n, cell = 12, bits = maskBits(c), acc = new Set(c.accepted_rows);
    const names = c.rows.map((r) => `${visible(tokenText(r.token)).slice(0, 12)} ${r.pos}`);
    const left = 8 + 11 * 0.62 * Math.max(...names.map((t) => t.length));
    const s = svg($("mask"), left + n * cell + 2, n * cell + 2, 1.5);
    s.setAttribute("font-size", String(Math.min(cell, 11)));
    c.rows.forEach((r, i) => {
      el("text", {x: left - 4, y: 1 + i * cell + cell / 2, dy: "0.35em", "text-anchor": "end", fill: colour(r.source)},
        s, names[i]);
      for (let j = 0; j < n; j++) {
        if (bits[i * n + j]) el("rect", {x: left + j * cell, y: 1 + i * cell, width: cell - 1, height: cell - 1,
          fill: acc.has(i) ? C.accepted : "#4a5160", class: "cell"}, s);
      }
    });
    el("rect", {x: left, y: 1, width: n * cell, height: n * cell, fill: "none", stroke: "#c8ccd2"}, s);
  }

  // -- the KV trim --------------------------------------------------------------------------------------------
  function drawKv(c) {
    const kept = new Set(c.kv_keep), n = c.n, box = $("kv");
    const dropped = n - kept.size;
    box.innerHTML = `<p>Before: <b>${c.cache_len}</b> positions. The verify block added <b>${n}</b> rows; ` +
      `the trim kept <b>${kept.size}</b> (the root and the accepted path) and dropped <b>${dropped}</b>. ` +
      `After: <b>${c.cache_len + kept.size}</b> positions.</p>`;
    const w = 400, cell = Math.max(2, Math.min(16, (w - 70) / Math.max(n, 1)));
    const s = el("svg", {viewBox: `0 0 ${w} 30`, width: "100%"}, box);
    el("rect", {x: 0, y: 4, width: 60, height: 22, fill: "#8a8f98"}, s);
    el("text", {x: 30, y: 15, dy: "0.35em", "text-anchor": "middle", fill: "#fff", "font-size": 10}, s, `${c.cache_len}`);
    for (let r = 0; r < n; r++) {
      el("rect", {x: 66 + r * cell, y: 4, width: cell - 1, height: 22, class: kept.has(r) ? "kept" : "dropped",
        fill: kept.has(r) ? C.accepted : "none", stroke: kept.has(r) ? C.accepted : C.rejected}, s);
    }
  }

  // -- the output ---------------------------------------------------------------------------------------------
  const out = $("output");
  const prompt = document.createElement("span");
  prompt.className = "prompt";
  prompt.textContent = S.prompt;
  out.appendChild(prompt);
  const spans = D.cycles.map((c) => c.committed.map(([t, kind]) => {
    const e = document.createElement("span");
    e.className = "t";
    e.textContent = tokenText(t);
    e.style.background = colour(kind) + "40";
    e.title = `cycle ${c.index} · ${C.labels[kind] || kind}`;
    out.appendChild(e);
    return e;
  }));

  // -- the chart ----------------------------------------------------------------------------------------------
  function drawChart(c) {
    const box = $("chart"), toks = D.charts.tokens, rate = D.charts.rate, n = toks.length;
    const font = document.body.classList.contains("present") ? 16 : 11;
    const W = Math.max(200, box.clientWidth), H = Math.max(40, box.clientHeight), left = 3 * font, bottom = font + 5;
    const w = W - left - 8, h = H - bottom - 6;
    const top = Math.max(1, ...toks), rtop = Math.max(1e-9, ...rate.filter((r) => r !== null));
    const bw = w / Math.max(n, 1);
    const s = svg(box, W, H);
    s.setAttribute("font-size", String(font));
    const y = (v, t) => 6 + h - h * v / t;
    toks.forEach((t, k) => el("rect", {x: left + k * bw, y: y(t, top), width: Math.max(bw - 1, 0.5),
      height: h * t / top, fill: k === c.index ? C.accepted : C.accepted + "70", class: "bar"}, s));
    // a cycle that ran no forward of its own (its token from the prefill) has no rate: no point
    el("polyline", {points: rate.flatMap((r, k) => r === null ? [] : [`${left + k * bw + bw / 2},${y(r, rtop)}`]).join(" "),
      fill: "none", stroke: "currentColor", "stroke-width": 1.2}, s);
    const cx = left + (c.index + 0.5) * bw;
    el("line", {x1: cx, x2: cx, y1: 6, y2: 6 + h, stroke: C.rejected}, s);
    el("text", {x: left - 4, y: 6, dy: "0.7em", "text-anchor": "end", fill: "currentColor"}, s, String(top));
    el("text", {x: left - 4, y: 6 + h, "text-anchor": "end", fill: "currentColor"}, s, "0");
    // whole cycle numbers only: the first, the last and the current
    if (cx - left > 60) el("text", {x: left, y: H - 3, fill: "currentColor"}, s, "0");
    if (left + w - cx > 60) el("text", {x: left + w, y: H - 3, "text-anchor": "end", fill: "currentColor"}, s, String(n - 1));
    el("text", {x: cx, y: H - 3, "text-anchor": "middle", fill: C.rejected}, s, `cycle ${c.index}`);
  }

  // -- moving through cycles ----------------------------------------------------------------------------------
  const range = $("timeline");
  range.max = String(Math.max(0, D.cycles.length - 1));
  function show(i) {
    if (!D.cycles.length) {
      $("why").textContent = "No cycle of this session was recorded.";
      return;
    }
    at = Math.max(0, Math.min(D.cycles.length - 1, i));
    const c = D.cycles[at];
    drawTree(c); drawMask(c); drawKv(c); drawChart(c);
    $("why").textContent = c.why;
    $("cycle-facts").textContent = `cycle ${c.index} · ${c.mode} · ${c.n} verified · ${c.tau} committed · ${c.ms.toFixed(1)} ms`;
    $("where").textContent = `cycle ${at} of ${D.cycles.length}`;
    range.value = String(at);
    spans.forEach((list, k) => list.forEach((e) => e.classList.toggle("now", k === at)));
    if (spans[at] && spans[at][0]) spans[at][0].scrollIntoView({block: "nearest"});
    document.body.dataset.cycle = String(at);
    if (location.hash !== `#cycle=${at}`) history.replaceState(null, "", `#cycle=${at}`);
  }
  function play(on) {
    if (timer) { clearInterval(timer); timer = null; }
    if (on) timer = setInterval(() => { if (at >= D.cycles.length - 1) play(false); else show(at + 1); }, 700);
    $("play").textContent = timer ? "❚❚" : "▶";
  }
  $("prev").onclick = () => show(at - 1);
  $("next").onclick = () => show(at + 1);
  $("play").onclick = () => play(!timer);
  const present = () => { document.body.classList.toggle("present"); show(at); };
  $("present").onclick = present;
  range.oninput = () => show(Number(range.value));
  window.addEventListener("resize", () => show(at));
  document.addEventListener("keydown", (e) => {
    if (e.ctrlKey || e.altKey || e.metaKey) return;
    const keys = {ArrowLeft: () => show(at - 1), ArrowRight: () => show(at + 1), Home: () => show(0),
      End: () => show(D.cycles.length - 1), " ": () => play(!timer),
      p: present, P: present};
    if (keys[e.key]) { e.preventDefault(); keys[e.key](); }
  });
  const m = /cycle=(\d+)/.exec(location.hash);
  if (/present/.test(location.hash)) document.body.classList.add("present");
  show(m ? Number(m[1]) : 0);
  document.body.dataset.ready = "1";
})();
