#!/usr/bin/env python3
"""Another PMPI tool in the same run as libhier (docs/tools.md), with tests/preload/count_tool.c,
a tool that counts its calls and prints them at MPI_Finalize ("tool rank R: MPI_X=n ...").

  run_tools.py COMMON --tool LIBTOOL --hier-run PATH -- program args
  1. the tool alone (no libhier): its counts and the program's output are the reference;
  2. hier-run --with-tool LIBTOOL (libhier.so first, the tool after it), HIER_LEVELS=node:2
     HIER_ALGO=hier: the tool counts what it counted alone, the output is the same, its report
     shows MPI_Allreduce run hierarchically (under the tool) and names the tool as the one after
     libhier; libhier says one thing, once: the tool's MPI_Barrier went to the MPI by a pointer of
     its own (the report counts those calls);
  3. the tool first (LD_PRELOAD="LIBTOOL libhier.so"): same counts and output, and libhier's
     rank 0 prints one line naming the tool and how to order LD_PRELOAD.
COMMON: --mpi openmpi|mpich --mpiexec PATH --lib libhier.so [--np N]
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

TIMEOUT = 120
LEVELS = {"HIER_LEVELS": "node:2", "HIER_ALGO": "hier"}


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


def launcher(args, preload):
    cmd = [args.mpiexec]
    if args.mpi == "openmpi":
        cmd += ["--allow-run-as-root", "--oversubscribe", "--bind-to", "none"]
        if preload is not None:
            cmd += ["-x", f"LD_PRELOAD={preload}"]
        for k in LEVELS:
            cmd += ["-x", k]
        cmd += ["-x", "HIER_REPORT"]
    elif preload is not None:
        cmd += ["-genv", "LD_PRELOAD", preload]
    return cmd + ["-n", str(args.np)]


def run(cmd, env_extra):
    env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD" and not k.startswith("HIER_")}
    env.update(env_extra)
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=TIMEOUT)
    if p.returncode != 0:
        fail(f"{' '.join(cmd)} failed (rc={p.returncode}):\n{p.stdout}\n{p.stderr}")
    return p.stdout, p.stderr


def split(out):
    """(the program's sorted rank lines, {rank: {function: count}} from the tool's lines)"""
    ranks, tool = [], {}
    for line in out.splitlines():
        m = re.match(r"tool rank (\d+):(.*)", line)
        if m:
            tool[int(m.group(1))] = dict((kv.split("=")[0], int(kv.split("=")[1])) for kv in m.group(2).split())
        elif line.startswith("rank"):
            ranks.append(line.rstrip())
    return sorted(ranks), tool


def report(path):
    with open(path) as f:
        return json.load(f)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mpi", required=True, choices=["openmpi", "mpich"])
    ap.add_argument("--mpiexec", required=True)
    ap.add_argument("--lib", required=True)
    ap.add_argument("--tool", required=True)
    ap.add_argument("--hier-run", required=True)
    ap.add_argument("--np", type=int, default=4)
    argv = sys.argv[1:]
    k = argv.index("--")
    args = ap.parse_args(argv[:k])
    program = argv[k + 1:]
    tool = os.path.realpath(args.tool)

    # 1. The tool alone.
    out0, _ = run(launcher(args, tool) + program, {})
    ranks0, tool0 = split(out0)
    if len(tool0) != args.np or not ranks0 or tool0[0].get("MPI_Allreduce", 0) == 0:
        fail(f"the tool alone printed no counts or the program no results:\n{out0}")

    with tempfile.TemporaryDirectory() as tmp:
        # 2. libhier first, through hier-run --with-tool (its LD_PRELOAD, checked in a dry run).
        rep = os.path.join(tmp, "first.%r.json")
        env = {**LEVELS, "HIER_REPORT": rep, "HIER_MPI": args.mpi}
        dry = subprocess.run([sys.executable, args.hier_run, "--dry-run", "--with-tool", tool, *launcher(args, None), *program],
                             env={**os.environ, **env}, capture_output=True, text=True, timeout=TIMEOUT)
        want = f"LD_PRELOAD={os.path.realpath(args.lib)}:{tool}"
        if dry.returncode != 0 or want not in dry.stdout.splitlines():
            fail(f"hier-run --with-tool: expected the line {want}, got (rc={dry.returncode}):\n{dry.stdout}{dry.stderr}")
        out1, err1 = run([sys.executable, args.hier_run, "--with-tool", tool, *launcher(args, None), *program], env)
        ranks1, tool1 = split(out1)
        if ranks1 != ranks0:
            fail("the program's results differ with libhier before the tool:\n" + "\n".join(sorted(set(ranks0) ^ set(ranks1))))
        if tool1 != tool0:
            fail(f"with libhier before it, the tool counted\n{tool1}\nbut alone\n{tool0}")
        # The tool's MPI_Barrier calls the MPI's PMPI_Barrier by its own pointer: said once (rank 0).
        said = [l for l in err1.splitlines() if "libhier" in l]
        if len(said) != 1 or "MPI_Barrier" not in said[0] or "directly" not in said[0]:
            fail(f"with the tool after it, libhier must say only that MPI_Barrier went around it, once:\n{err1}")
        r = report(rep.replace("%r", "0"))
        algos = r["functions"].get("MPI_Allreduce", {}).get("algorithms", {})
        if not any(a != "flat" for a in algos):
            fail(f"MPI_Allreduce did not run hierarchically under the tool: {algos}")
        after = [t["library"] for t in r.get("tools", {}).get("after_libhier", [])]
        rounds = tool0[0]["MPI_Barrier"]
        if not any(os.path.realpath(a) == tool for a in after) or r["tools"]["went_around"] != rounds:
            fail(f"the report's tools section does not name the tool after libhier: {r.get('tools')}")

        # 3. The tool first: libhier says so, and the run is what it is without libhier.
        rep = os.path.join(tmp, "second.%r.json")
        out2, err2 = run(launcher(args, f"{tool}:{args.lib}") + program, {**LEVELS, "HIER_REPORT": rep})
        ranks2, tool2 = split(out2)
        if ranks2 != ranks0 or tool2 != tool0:
            fail(f"with the tool before libhier the run changed:\n{out2}")
        lines = [l for l in err2.splitlines() if "libhier" in l]
        if (len(lines) != 1 or os.path.basename(tool) not in lines[0] or "before libhier.so" not in lines[0]
                or "--with-tool" not in lines[0]):
            fail(f"expected one line from libhier naming the tool and the order to use, got:\n{err2}")
        before = [t for t in report(rep.replace("%r", "0")).get("tools", {}).get("before_libhier", [])]
        if not any(os.path.realpath(t["library"]) == tool and "MPI_Allreduce" in t["functions"] for t in before):
            fail(f"the report does not name the tool before libhier: {before}")
    print(f"OK: the tool counts the same with libhier before it ({tool0[0]}), MPI_Allreduce ran {sorted(algos)} under it; "
          f"with the tool first: {lines[0]}")


if __name__ == "__main__":
    main()
