#!/usr/bin/env python3
"""Per-step table of a merged HIER_TRACE (hier-report --trace OUT): per step name, its bytes (rank 0),
median duration and share of its call, the entry skew (first to last rank of its group entering) and
the median time after the last rank entered. Each rank's first call is left out. Groups: ranks are
consecutive per node, PPN per node (cross steps: same rank in the node; node steps: same node).
  bench/trace/steps.py merged.json [PPN]"""
import json, sys, statistics as st
if len(sys.argv) < 2 or sys.argv[1] in ("-h", "--help"):
    print("usage: bench/trace/steps.py merged.json [PPN]")
    print(__doc__)
    sys.exit(0 if len(sys.argv) >= 2 else 2)
m = json.load(open(sys.argv[1]))["traceEvents"]
nr = 1 + max(e["pid"] for e in m)
PPN = int(sys.argv[2]) if len(sys.argv) > 2 else 2
calls = {r: sorted([e for e in m if e.get("cat") == "call" and e["pid"] == r and not e["args"]["algorithm"].startswith("flat")], key=lambda e: e["ts"])[1:] for r in range(nr)}
ncalls = min(len(v) for v in calls.values())
steps = {}
for e in m:
    if e.get("cat") == "step": steps.setdefault((e["pid"], e["args"]["call_id"]), []).append(e)
durs, shares, after, skew = {}, {}, {}, {}
calld = []
for k in range(ncalls):
    per = {}
    for r in range(nr):
        c = calls[r][k]; calld.append(c["dur"])
        for e in steps.get((r, c["args"]["id"]), []):
            durs.setdefault(e["name"], []).append(e["dur"])
            shares.setdefault(e["name"], []).append(e["dur"] / c["dur"])
            per.setdefault(e["name"], []).append((r, (e["ts"], e["ts"] + e["dur"])))
    for name, v in per.items():
        # per group of the level's communicator (ranks consecutive per node, PPN per node)
        groups = {}
        for r, (a, b) in v:
            g = r % PPN if "cross" in name else r // PPN if "node" in name else r
            groups.setdefault(g, []).append((a, b))
        for w in groups.values():
            last_in = max(a for a, b in w)
            after.setdefault(name, []).append(st.median([b - last_in for a, b in w]))
            skew.setdefault(name, []).append(last_in - min(a for a, b in w))
print(f"calls per rank (first left out): {ncalls}; call median {st.median(calld)/1e3:.1f} ms")
print("| step | bytes | median ms | share of the call | entry skew ms | after the last rank entered ms |")
print("|---|---:|---:|---:|---:|---:|")
order = sorted(durs, key=lambda n: -sum(durs[n]))
b = {}
for e in m:
    if e.get("cat") == "step" and e["pid"] == 0: b[e["name"]] = e["args"]["bytes"]
for n in order:
    print(f"| {n} | {b.get(n, '')} | {st.median(durs[n])/1e3:.1f} | {100*st.median(shares[n]):.0f}% | {st.median(skew[n])/1e3:.1f} | {st.median(after[n])/1e3:.1f} |")
