#!/usr/bin/env python3
"""Draws a merged HIER_TRACE file (`hier-report --trace OUT`) as a timeline in a self-contained
HTML page (canvas, no network), for a screenshot with headless Chromium:

  bench/trace/render.py merged.json page.html [--from MS --to MS] [--title TEXT]
  chromium --headless --no-sandbox --hide-scrollbars --window-size=1600,900 \
      --screenshot=docs/trace.png file://$PWD/page.html

One band per rank (pid) and thread (tid): call slices on the first row, their steps below;
a rank's nonblocking requests (async slices) on a band of their own. --from/--to: the window,
in ms from the first event.
"""
import argparse
import json

PAGE = r"""<!doctype html><html><head><meta charset="utf-8"><title>TITLE</title>
<style>body{margin:0;font:12px sans-serif;background:#fff}#h{padding:6px 10px;font-size:14px}</style>
</head><body><div id="h">TITLE</div><canvas id="c"></canvas><script>
const ev = DATA, win = WINDOW;
const W = window.innerWidth, LABEL = 150, ROW = 18;
const bands = new Map();  // key -> {label, rows: [[slices]]}
function band(key, label) { if (!bands.has(key)) bands.set(key, {label, rows: [[], []]}); return bands.get(key); }
let t0 = Infinity;
for (const e of ev) if (e.ts !== undefined && e.ph !== "M") t0 = Math.min(t0, e.ts);
const pname = {}, tname = {};
for (const e of ev) if (e.ph === "M" && e.name === "thread_name") tname[e.pid + "/" + e.tid] = e.args.name;
for (const e of ev) {
  if (e.ph === "X") {
    const b = band(e.pid + "/" + e.tid, "rank " + e.pid + " " + (tname[e.pid + "/" + e.tid] || ""));
    b.rows[e.cat === "call" ? 0 : 1].push({s: e.ts - t0, d: e.dur, name: e.name, call: e.cat === "call"});
  }
}
const open = {};
for (const e of ev.slice().sort((a, b) => a.ts - b.ts)) {
  if (e.cat !== "request" || (e.ph !== "b" && e.ph !== "e")) continue;
  const k = e.pid + "/" + e.id + "/" + e.name;
  if (e.ph === "b") { (open[k] = open[k] || []).push(e); continue; }
  const b = (open[k] || []).pop(); if (!b) continue;
  const own = b.args && b.args.call;
  band(e.pid + "/async", "rank " + e.pid + " requests").rows[own ? 0 : 1].push({s: b.ts - t0, d: e.ts - b.ts, name: e.name, call: own});
}
const keys = [...bands.keys()].sort((a, b) => { const [pa, ta] = a.split("/"), [pb, tb] = b.split("/");
  return pa - pb || (ta === "async") - (tb === "async") || ta.localeCompare(tb); });
let lo = win[0] !== null ? win[0] * 1e3 : 0, hi = win[1] !== null ? win[1] * 1e3 : 0;
if (win[1] === null) for (const k of keys) for (const r of bands.get(k).rows) for (const s of r) hi = Math.max(hi, s.s + s.d);
const H = 40 + keys.length * (2 * ROW + 8);
const c = document.getElementById("c"); c.width = W; c.height = H; const g = c.getContext("2d");
const x = t => LABEL + (t - lo) / (hi - lo) * (W - LABEL - 10);
function color(name) { let h = 0; for (const ch of name.split(" ")[0]) h = (h * 31 + ch.charCodeAt(0)) % 360;
  return "hsl(" + h + ",55%,65%)"; }
g.font = "11px sans-serif"; g.textBaseline = "middle";
let y = 10;
for (const k of keys) {
  const b = bands.get(k);
  g.fillStyle = "#f4f4f4"; g.fillRect(0, y - 2, W, 2 * ROW + 4);
  g.fillStyle = "#222"; g.fillText(b.label, 6, y + ROW);
  b.rows.forEach((row, i) => {
    for (const s of row) {
      if (s.s + s.d < lo || s.s > hi) continue;
      const a = Math.max(LABEL, x(s.s)), z = Math.min(W - 10, x(s.s + s.d)), w = Math.max(1, z - a);
      g.fillStyle = s.call ? "#8fb3d9" : color(s.name); g.fillRect(a, y + i * ROW, w, ROW - 2);
      g.strokeStyle = "#555"; g.lineWidth = 0.5; g.strokeRect(a, y + i * ROW, w, ROW - 2);
      if (w > 40) { g.save(); g.beginPath(); g.rect(a, y + i * ROW, w, ROW); g.clip();
        g.fillStyle = "#000"; g.fillText(s.name, a + 3, y + i * ROW + ROW / 2 - 1); g.restore(); }
    }
  });
  y += 2 * ROW + 8;
}
g.strokeStyle = "#999"; g.beginPath(); g.moveTo(LABEL, y); g.lineTo(W - 10, y); g.stroke();
g.fillStyle = "#222";
let step = Math.pow(10, Math.floor(Math.log10((hi - lo) / 8)));
for (const f of [2, 2.5, 2]) if ((hi - lo) / step > 12) step *= f;
for (let t = Math.ceil(lo / step) * step; t <= hi; t += step) {
  g.fillRect(x(t), y, 1, 5); g.fillText((t / 1e3).toFixed(step >= 1e3 ? 0 : step >= 100 ? 1 : 2) + " ms", x(t) - 14, y + 14);
}
</script></body></html>
"""


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("merged")
    ap.add_argument("out")
    ap.add_argument("--from", dest="lo", type=float, default=None)
    ap.add_argument("--to", dest="hi", type=float, default=None)
    ap.add_argument("--title", default="libhier trace")
    a = ap.parse_args()
    with open(a.merged) as f:
        ev = json.load(f)["traceEvents"]
    page = PAGE.replace("TITLE", a.title).replace("WINDOW", json.dumps([a.lo, a.hi])).replace(
        "DATA", json.dumps(ev))  # last: the events' text is not searched for the other names
    with open(a.out, "w") as f:
        f.write(page)


if __name__ == "__main__":
    main()
