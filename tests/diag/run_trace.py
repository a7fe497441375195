#!/usr/bin/env python3
"""Runs tests/diag/trace.c on 4 ranks as 2 fake nodes of 2 (HIER_LEVELS=node:2, HIER_ALGO=hier)
with HIER_TRACE, merges the ranks' traces with `hier-report --trace`, and checks the merged file
with the json module: it loads; one process per rank (process_name); every step slice lies
inside its call's slice on the same pid and tid (blocking calls) or inside its request's async
slice (the nonblocking call); every rank has steps of each call the schedule ran; async begin
and end events pair up; the summary names the collectives. Then once more with HIER_TRACE in a
directory that does not exist: the program still succeeds and one warning names HIER_TRACE.

usage: run_trace.py --mpi openmpi|mpich --mpiexec PATH --lib libhier.so --exe trace --tool tools/hier-report
"""
import argparse
import glob
import json
import os
import subprocess
import sys
import tempfile

from common import fail, launch

NP = 4
EPS = 0.01  # us: the files round times to ns


def run(a, env_vars):
    cmd, env = launch(a.mpi, a.mpiexec, env_vars, NP, [a.exe])
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=120)


def check_merged(m):
    ev = m.get("traceEvents")
    if not isinstance(ev, list) or not ev:
        fail("merged trace: no traceEvents")
    names = {e["pid"]: e["args"]["name"] for e in ev if e.get("ph") == "M" and e.get("name") == "process_name"}
    if sorted(names) != list(range(NP)) or any(names[r] != f"rank {r}" for r in names):
        fail(f"merged trace: process_name per rank expected, got {names}")
    calls = {}  # (pid, id) -> call slice
    for e in ev:
        if e.get("cat") == "call" and e.get("ph") == "X":
            calls[(e["pid"], e["args"]["id"])] = e
    # Blocking steps: inside their call, same pid and tid.
    nsteps = 0
    steps_of = {}  # (pid, call id) -> steps
    for e in ev:
        if e.get("cat") != "step":
            continue
        nsteps += 1
        c = calls.get((e["pid"], e["args"]["call_id"]))
        if c is None:
            fail(f"step {e['name']} of rank {e['pid']}: no call slice with id {e['args']['call_id']}")
        if c["tid"] != e["tid"] or e["ts"] < c["ts"] - EPS or e["ts"] + e["dur"] > c["ts"] + c["dur"] + EPS:
            fail(f"step {e['name']} of rank {e['pid']} at {e['ts']}+{e['dur']} (tid {e['tid']}) is not inside "
                 f"its call {c['name']} at {c['ts']}+{c['dur']} (tid {c['tid']})")
        for k in ("level", "bytes", "transport", "kind"):
            if k not in e["args"] and not (k == "level" and e["args"]["transport"] in ("local", "device kernel")):
                fail(f"step {e['name']}: no {k} in {e['args']}")
        steps_of.setdefault((e["pid"], e["args"]["call_id"]), []).append(e)
    if not nsteps:
        fail("merged trace: no step slices")
    # Async slices: begin/end pairs per (pid, id, name); steps inside their request.
    opened, spans = {}, {}
    for e in sorted((e for e in ev if e.get("cat") == "request"), key=lambda e: (e["ts"], e["ph"] == "b")):
        k = (e["pid"], e["id"], e["name"])
        if e["ph"] == "b":
            opened.setdefault(k, []).append(e)
        elif e["ph"] == "e":
            if not opened.get(k):
                fail(f"async end without begin: {k}")
            b = opened[k].pop()
            spans.setdefault((e["pid"], e["id"]), []).append((b, e))
    left = [k for k, v in opened.items() if v]
    if left:
        fail(f"async begin without end: {left}")
    requests = {}
    for (pid, rid), pairs in spans.items():
        own = [(b, e) for b, e in pairs if "call" in (b.get("args") or {})]
        if len(own) != 1:
            fail(f"rank {pid} request {rid}: {len(own)} request slices")
        rb, re_ = own[0]
        requests[(pid, rid)] = rb
        for b, e in pairs:
            if (b, e) == own[0]:
                continue
            if b["ts"] < rb["ts"] - EPS or e["ts"] > re_["ts"] + EPS:
                fail(f"rank {pid}: async step {b['name']} {b['ts']}..{e['ts']} outside its request "
                     f"{rb['ts']}..{re_['ts']}")
            steps_of.setdefault((pid, rid), []).append(b)
    if len(requests) != NP or any(b["name"] != "MPI_Iallreduce" for b in requests.values()):
        fail(f"one MPI_Iallreduce request per rank expected, got {[(k, b['name']) for k, b in requests.items()]}")
    # Every rank has steps of each call libhier ran: the k-th such call of every rank (ranks call
    # collectives in one order) is the same collective, and has steps on every rank.
    def handled(pid):
        mine = [c for (p, _), c in calls.items() if p == pid and not c["args"]["algorithm"].startswith("flat")]
        return sorted(mine, key=lambda c: c["ts"])
    per_rank = [handled(r) for r in range(NP)]
    if len({len(x) for x in per_rank}) != 1 or len(per_rank[0]) < 4:
        fail(f"ranks disagree on (or ran too few of) the calls libhier handled: {[len(x) for x in per_rank]}")
    for k in range(len(per_rank[0])):
        names = {per_rank[r][k]["name"] for r in range(NP)}
        if len(names) != 1:
            fail(f"call #{k}: ranks ran {names}")
        for r in range(NP):
            c = per_rank[r][k]
            rid = c["args"]["id"]
            if not steps_of.get((r, rid)):
                fail(f"rank {r}: no steps of its call #{k} ({c['name']}, id {rid})")
            for key in ("bytes", "plan", "predicted_us", "site", "algorithm"):
                if key not in c["args"] and not (key == "predicted_us" and c["name"] == "MPI_Iallreduce"):
                    fail(f"rank {r} call {c['name']}: no {key} in {c['args']}")
    return nsteps, len(per_rank[0])


def main():
    ap = argparse.ArgumentParser()
    for k in ("mpi", "mpiexec", "lib", "exe", "tool"):
        ap.add_argument("--" + k, required=True)
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="hier-trace-")
    base = {"LD_PRELOAD": a.lib, "HIER_LEVELS": "node:2", "HIER_ALGO": "hier"}
    p = run(a, dict(base, HIER_TRACE=f"{tmp}/t%r.json"))
    if p.returncode != 0:
        fail(f"run failed ({p.returncode}): {p.stdout}{p.stderr}")
    files = sorted(glob.glob(f"{tmp}/t*.json"))
    if len(files) != NP:
        fail(f"{NP} trace files expected, found {files}")
    for f in files:
        with open(f) as fh:
            t = json.load(fh)
        if t.get("format") != "libhier-trace/1" or not t.get("traceEvents"):
            fail(f"{f}: not a libhier-trace/1 file with events")
    out = os.path.join(tmp, "merged.json")
    q = subprocess.run([sys.executable, a.tool, "--trace", out, tmp], capture_output=True, text=True, timeout=60)
    if q.returncode != 0:
        fail(f"hier-report --trace failed ({q.returncode}): {q.stdout}{q.stderr}")
    with open(out) as fh:
        merged = json.load(fh)
    nsteps, ncalls = check_merged(merged)
    for want in ("MPI_Allreduce", "MPI_Iallreduce", "largest step:", "predicted"):
        if want not in q.stdout:
            fail(f"hier-report --trace summary lacks '{want}':\n{q.stdout}")
    print(q.stdout)
    print(f"ok: {ncalls} calls per rank traced, {nsteps} step slices nested")
    # A trace that cannot be written: one warning, the program is unaffected.
    p = run(a, dict(base, HIER_TRACE=f"{tmp}/no/such/dir/t%r.json"))
    if p.returncode != 0:
        fail(f"run with an unwritable HIER_TRACE failed ({p.returncode}): {p.stderr}")
    if "HIER_TRACE: cannot write" not in p.stderr:
        fail(f"no warning for an unwritable HIER_TRACE:\n{p.stderr}")
    print("ok: an unwritable HIER_TRACE warns and the program succeeds")


if __name__ == "__main__":
    main()
