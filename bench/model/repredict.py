#!/usr/bin/python3
"""Offline re-prediction of validate.sh's measurements with another model or another hier-sim.

    repredict.py --old-sim OLD/hier-sim --new-sim NEW/hier-sim --results bench/model/results
                 [--builtin-dir src/model] [--report v3-report.md v3-4x2-report.md] [--tune-prefix v3-tune]

The measured columns are those of the reports (validate_report.py's tables: the median over
repetitions); no MPI runs. Per table (MPI x shape) and per model (the tune file hier-tune measured
in the same run, and the built-in file of the family), each cell is predicted twice, by the old and
the new hier-sim: libhier's schedule (the algorithm that was measured, `--algo`), the MPI's own
collective, and the default planner's decision (H = hierarchical, F = flat). "best" is the faster
measured variant (H where libhier's schedule measured more than 5% faster than the MPI alone,
F where it measured more than 5% slower, = in between, where either decision is right).
"""
import argparse
import csv
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools"))
import collectives  # noqa: E402  (tools/collectives.py: the rows of src/config/collectives.def)

ap = argparse.ArgumentParser()
ap.add_argument("--old-sim", required=True)
ap.add_argument("--new-sim", required=True)
ap.add_argument("--results", default="bench/model/results")
ap.add_argument("--builtin-dir", default="src/model")
ap.add_argument("--old-builtin-dir", default=None, help="the built-in files the old hier-sim is given (default: --builtin-dir)")
ap.add_argument("--report", nargs="+", default=["v3-report.md", "v3-4x2-report.md"])
ap.add_argument("--tune-prefix", default="v3-tune")
a = ap.parse_args()

SIZE = {"KiB": 1 << 10, "MiB": 1 << 20}


def parse_reports():
    """(mpi, shape) -> list of cells {coll, bytes, mpi_ms, hier_ms, algo, auto_ms, planner}."""
    tables = {}
    for name in a.report:
        tag = None
        for line in open(os.path.join(a.results, name)):
            m = re.match(r"### (\w+)-(\d+x\d+)", line)
            if m:
                tag = (m[1], m[2])
                tables[tag] = []
                continue
            f = [x.strip() for x in line.strip().strip("|").split("|")]
            if tag is None or len(f) != 12 or not re.match(r"\d+ (KiB|MiB)$", f[1]):
                continue
            n, unit = f[1].split()
            fl = lambda x: float(x) if x not in ("-", "") else None
            tables[tag].append({"coll": f[0], "bytes": int(n) * SIZE[unit], "mpi_ms": fl(f[2]), "hier_ms": fl(f[5]),
                                "algo": f[8], "auto_ms": fl(f[9]), "planner": f[10], "old_flat_pred": fl(f[3]),
                                "old_hier_pred": fl(f[6])})
    return tables


def simulate(sim, model, nodes, ppn, cell, algo=None):
    machine = {"name": "emulated cluster", "levels": [{"name": "node", "size": ppn}], "nodes": [nodes], "model": model}
    with tempfile.TemporaryDirectory() as d:
        mp, cp = os.path.join(d, "m.json"), os.path.join(d, "o.csv")
        json.dump(machine, open(mp, "w"))
        b = collectives.sim_bytes(cell["coll"], cell["bytes"], nodes * ppn)  # the report's size: hier-bench's
        cmd = [sim, "--machine", mp, "--coll", cell["coll"], "--bytes", str(b), "--csv", cp]
        if algo:
            cmd += ["--algo", algo]
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        r = next(csv.DictReader(open(cp)))
        return float(r["libhier_ns"]) / 1e6, float(r["flat_mpi_ns"]) / 1e6, r["planner"], f"{r['libhier_algorithm']}/{r['chunks']}"


def best(cell):
    if cell["mpi_ms"] is None or cell["hier_ms"] is None:
        return "?"
    r = cell["mpi_ms"] / cell["hier_ms"]
    return "H" if r > 1.05 else "F" if r < 1 / 1.05 else "="


def size(b):
    return f"{b >> 20} MiB" if b >= 1 << 20 else f"{b >> 10} KiB"


def stats(errs):
    ab = [abs(x) for x in errs if x is not None]
    if not ab:
        return "-"
    return f"median |err| {statistics.median(ab):.0%}, max {max(ab):.0%}, over 40%: {sum(x > 0.4 for x in ab)} of {len(ab)}"


tables = parse_reports()
old_bdir = a.old_builtin_dir or a.builtin_dir
print("Offline re-prediction (bench/model/repredict.py): measured columns from "
      + ", ".join(a.report) + "; predictions by the old and the new hier-sim (`--algo`: the algorithm that was measured).\n")
print("Decision columns: H = hierarchical, F = flat (the MPI), * = a hierarchical algorithm other than the one measured "
      "(its time is not measured); best: H where the measured schedule beat the MPI by >5%, F where it lost by >5%, "
      "= within 5%. A wrong decision is marked **LOSS** (H where the MPI measured >5% faster) or *missed* (F where "
      "hier measured >5% faster).\n")
for (mpi, shape), cells in sorted(tables.items()):
    nodes, ppn = map(int, shape.split("x"))
    tune_path = os.path.join(a.results, f"{a.tune_prefix}-{mpi}-{shape}.json")
    for label, old_model, new_model in (
            (f"tune file {os.path.basename(tune_path)}", json.load(open(tune_path)), json.load(open(tune_path))),
            (f"built-in builtin-{mpi}.json", json.load(open(os.path.join(old_bdir, f"builtin-{mpi}.json"))),
             json.load(open(os.path.join(a.builtin_dir, f"builtin-{mpi}.json"))))):
        print(f"### {mpi} {shape}, {label}\n")
        print("| collective | size | MPI ms | old pred | new pred | hier ms (algo) | old pred | err | new pred | err | "
              "best | old decision | new decision |")
        print("|---|---:|---:|---:|---:|---|---:|---:|---:|---:|:-:|---|---|")
        eo, en, efo, efn, wrong_o, wrong_n = [], [], [], [], [], []
        for c in cells:
            algo = c["algo"]
            oh, of, od, oa = simulate(a.old_sim, old_model, nodes, ppn, c, algo)
            nh, nf, nd, na = simulate(a.new_sim, new_model, nodes, ppn, c, algo)
            _, _, od, oa = simulate(a.old_sim, old_model, nodes, ppn, c)
            _, _, nd, na = simulate(a.new_sim, new_model, nodes, ppn, c)
            err = lambda p, m: p / m - 1 if m else None
            eo.append(err(oh, c["hier_ms"]))
            en.append(err(nh, c["hier_ms"]))
            efo.append(err(of, c["mpi_ms"]))
            efn.append(err(nf, c["mpi_ms"]))
            bst = best(c)

            def dec(d, alg, bucket):
                h = d != "flat"
                mark = ("*" if alg != algo else "") if h else ""
                s = ("H " + alg if h else "F") + mark
                if h and bst == "F" and not mark:
                    s += " **LOSS**"
                    bucket.append(f"{c['coll']} {size(c['bytes'])}")
                elif not h and bst == "H":
                    s += " *missed*"
                    bucket.append(f"{c['coll']} {size(c['bytes'])}")
                return s

            pct = lambda x: f"{x:+.0%}" if x is not None else "-"
            print(f"| {c['coll']} | {size(c['bytes'])} | {c['mpi_ms']:.1f} | {of:.1f} | {nf:.1f} | {c['hier_ms']:.1f} ({algo}) | "
                  f"{oh:.1f} | {pct(err(oh, c['hier_ms']))} | {nh:.1f} | {pct(err(nh, c['hier_ms']))} | {bst} | "
                  f"{dec(od, oa, wrong_o)} | {dec(nd, na, wrong_n)} |")
        print()
        print(f"- hier predictions, old: {stats(eo)}; new: {stats(en)}")
        print(f"- flat predictions, old: {stats(efo)}; new: {stats(efn)}")
        print(f"- wrong decisions (by the measured times), old: {len(wrong_o)} ({', '.join(wrong_o) or 'none'}); "
              f"new: {len(wrong_n)} ({', '.join(wrong_n) or 'none'})")
        print()
