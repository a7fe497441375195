#!/usr/bin/env python3
"""Checks the "quantization" section of a finalize report (rank 0's file).

usage: check_quant_report.py REPORT [--colls C,C,...] [--ratio R] [--check MAXREL] [--feedback] [--requests]
  --colls: these collectives (allreduce, reduce_scatter_block, reduce_scatter, allgather) ran
           quantized, and each saved bytes across nodes: exact equivalent >= R x what was sent
  --check MAXREL: each of them was checked (HIER_QUANT_CHECK), with a largest relative error
           in (0, MAXREL]: an error was measured (lossy), and it is within bounds
  --feedback: error feedback kept residuals (sites > 0, bytes within the cap)
  --requests: some of each of --colls' quantized calls were nonblocking or persistent requests
  --absent: the report has no quantization section (nothing quantized)
  --block B: the section states block B (HIER_QUANT_BLOCK), and the planner section shows, for
           each of --colls, plans that chose quantization with a predicted time, and the
           quantization section both predicted times (quantized and exact)
"""
import argparse
import json
import sys


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("report")
    ap.add_argument("--colls", default="")
    ap.add_argument("--ratio", type=float, default=3.5)
    ap.add_argument("--check", type=float)
    ap.add_argument("--feedback", action="store_true")
    ap.add_argument("--requests", action="store_true")
    ap.add_argument("--absent", action="store_true")
    ap.add_argument("--block", type=int)
    a = ap.parse_args()
    with open(a.report) as f:
        rep = json.load(f)
    q = rep.get("quantization")
    errors = []
    if a.absent:
        colls = (q or {}).get("collectives", {})
        if any(c.get("calls", 0) for c in colls.values()):
            errors.append(f"quantized calls found: {colls}")
    elif q is None:
        errors.append("no quantization section")
    else:
        colls = q.get("collectives", {})
        for c in filter(None, a.colls.split(",")):
            e = colls.get(c)
            if not e or e.get("calls", 0) == 0:
                errors.append(f"{c}: no quantized call ({colls})")
                continue
            if a.requests and not 0 < e.get("requests", 0) <= e["calls"]:
                errors.append(f"{c}: no quantized request counted: {e}")
            if e["cross_bytes_sent"] * a.ratio > e["cross_bytes_exact"] or e["cross_bytes_saved"] <= 0:
                errors.append(f"{c}: saved too little: {e}")
            if a.check is not None:
                ch = e.get("check")
                if not ch or ch.get("calls", 0) == 0:
                    errors.append(f"{c}: not checked: {e}")
                elif not (0 < ch["max_rel_error"] <= a.check):
                    errors.append(f"{c}: max_rel_error {ch['max_rel_error']} not in (0, {a.check}]")
        if a.block is not None:
            if q.get("block") != a.block:
                errors.append(f"block {q.get('block')}, expected {a.block}")
            plan = rep.get("planner", {})
            for c in filter(None, a.colls.split(",")):
                p = plan.get(c, {})
                if p.get("quantized", 0) == 0 or not p.get("quantized_ms", 0) > 0:
                    errors.append(f"planner {c}: no quantized plan with a predicted time: {p}")
                e = colls.get(c, {})
                if not (e.get("predicted_ms", 0) > 0 and e.get("exact_predicted_ms", 0) > 0):
                    errors.append(f"{c}: predicted times missing: {e}")
        if a.check is not None and not q.get("checked_sites"):
            errors.append("no checked_sites")
        if a.feedback:
            fb = q.get("feedback")
            if not fb or fb.get("sites", 0) == 0 or fb["bytes"] > fb["cap_bytes"] or fb.get("calls", 0) == 0:
                errors.append(f"feedback: {fb}")
    for e in errors:
        print("check_quant_report:", e)
    print("check_quant_report:", "FAILED" if errors else "ok", a.report)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
