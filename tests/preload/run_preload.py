#!/usr/bin/env python3
"""Runs unmodified MPI programs with and without libhier preloaded and checks what a user
would check: same output, same exit code, the calls seen in the report, clear errors.

  run_preload.py compare  COMMON -- program args   output identical; report lists --expect calls
  run_preload.py badenv   COMMON -- program args   invalid HIER_* value: one clear line, same output;
                                                   with HIER_STRICT=1: clean stop
  run_preload.py wrongmpi COMMON -- program args   program of the other MPI: clear stop at init
  run_preload.py nonmpi   COMMON                   non-MPI processes (and the launcher) unaffected
COMMON: --mpi openmpi|mpich --mpiexec PATH --lib libhier.so [--np N] [--expect MPI_X=n,...]
"""
import argparse
import glob
import json
import os
import subprocess
import sys
import tempfile

TIMEOUT = 180


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


def launcher(args, preload, np=None, mpiexec=None, mpi=None):
    mpi = mpi or args.mpi
    cmd = [mpiexec or args.mpiexec]
    if mpi == "openmpi":
        cmd += ["--allow-run-as-root", "--oversubscribe", "--bind-to", "none", "-x", f"LD_PRELOAD={preload}"]
    else:
        cmd += ["-genv", "LD_PRELOAD", preload]
    return cmd + ["-n", str(np or args.np)]


def run(cmd, env_extra=None):
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)
    env.update(env_extra or {})
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=TIMEOUT)
    return p.returncode, p.stdout, p.stderr


def rank_lines(out):
    return sorted(l.rstrip() for l in out.splitlines() if l.lstrip().startswith("rank"))


def check_reports(args, pattern, np):
    files = sorted(glob.glob(pattern.replace("%r", "*")))
    if len(files) != np:
        fail(f"expected {np} report files matching {pattern}, found {files}")
    built_for = {"openmpi": "Open MPI", "mpich": "MPICH"}[args.mpi]
    for f in files:
        with open(f) as fh:
            rep = json.load(fh)
        if rep.get("format") != "libhier-report/1" or rep["libhier"]["built_for"] != built_for:
            fail(f"{f}: unexpected header {rep.get('format')} {rep.get('libhier')}")
        for item in filter(None, (args.expect or "").split(",")):
            exact = "==" in item  # MPI_X==n: exactly n calls; MPI_X=n: at least n
            name, n = item.split("==") if exact else item.split("=")
            got = rep["functions"].get(name, {}).get("calls", 0)
            if (exact and got != int(n)) or got < int(n):
                fail(f"{f}: {name} seen {got} times, expected {'exactly' if exact else 'at least'} {n}")
            algos = rep["functions"].get(name, {}).get("algorithms", {})
            if int(n) and sum(a["calls"] for a in algos.values()) != got - rep["functions"][name]["errors"]:
                fail(f"{f}: {name}: per-algorithm calls do not add up: {algos}")
    return files


def cmd_compare(args):
    env = dict(kv.split("=", 1) for kv in args.env)
    rc0, out0, err0 = run(launcher(args, "") + args.program, env)
    if rc0 != 0:
        fail(f"baseline run failed (rc={rc0}):\n{out0}\n{err0}")
    with tempfile.TemporaryDirectory() as tmp:
        pattern = os.path.join(tmp, "report.%r.json")
        rc1, out1, err1 = run(launcher(args, args.lib) + args.program, {**env, "HIER_REPORT": pattern})
        if rc1 != 0:
            fail(f"run with libhier failed (rc={rc1}):\n{out1}\n{err1}")
        a, b = rank_lines(out0), rank_lines(out1)
        if not a:
            fail("the program printed no 'rank' lines: nothing compared")
        if a != b:
            diff = [f"- {x}" for x in a if x not in b] + [f"+ {x}" for x in b if x not in a]
            fail("outputs differ with libhier:\n" + "\n".join(diff[:40]))
        if "libhier" in err1:
            fail(f"libhier printed messages on a clean run:\n{err1}")
        files = check_reports(args, pattern, args.np)
    print(f"OK: {len(a)} result lines identical with and without libhier; {len(files)} reports checked")


def cmd_badenv(args):
    rc0, out0, _ = run(launcher(args, "") + args.program)
    rc1, out1, err1 = run(launcher(args, args.lib) + args.program, {"HIER_ALGO": "allreduce=fastest", "HIER_LEVLES": "node:2"})
    if rc1 != 0 or rank_lines(out0) != rank_lines(out1):
        fail(f"an invalid HIER_ALGO changed the run (rc={rc1}):\n{out1}\n{err1}")
    lines = [l for l in err1.splitlines() if "HIER_ALGO" in l]
    if len(lines) != 1 or "fastest" not in lines[0] or "allowed" not in lines[0]:
        fail(f"expected one line naming HIER_ALGO, the value and what is allowed; got:\n{err1}")
    typo = [l for l in err1.splitlines() if "HIER_LEVLES" in l]
    if len(typo) != 1 or "did you mean HIER_LEVELS" not in typo[0]:
        fail(f"expected one did-you-mean line for HIER_LEVLES; got:\n{err1}")
    rc2, out2, err2 = run(launcher(args, args.lib) + args.program, {"HIER_ALGO": "bogus", "HIER_STRICT": "1"})
    if rc2 == 0 or "HIER_ALGO" not in err2 or "HIER_STRICT" not in err2:
        fail(f"HIER_STRICT=1 with an invalid value must stop with the message (rc={rc2}):\n{err2}")
    print("OK: invalid value reported in one line, run unchanged; HIER_STRICT=1 stops cleanly")


def cmd_wrongmpi(args):
    other = "mpich" if args.mpi == "openmpi" else "openmpi"
    with tempfile.TemporaryDirectory() as tmp:
        exe = os.path.join(tmp, "prog")
        src = args.program[0]
        subprocess.run([f"mpicc.{other}", src, "-o", exe, "-w"], check=True)
        cmd = launcher(args, args.lib, np=2, mpiexec=f"/usr/bin/mpiexec.{other}", mpi=other) + [exe]
        rc, out, err = run(cmd)
    mine = {"openmpi": "Open MPI", "mpich": "MPICH"}[args.mpi]
    theirs = {"openmpi": "Open MPI", "mpich": "MPICH"}[other]
    if rc == 0 or f"built for {mine}" not in err or theirs not in err:
        fail(f"expected a clear stop naming both MPIs (rc={rc}):\n{out}\n{err}")
    print(f"OK: the {mine} build stops a {theirs} program at init: {err.strip().splitlines()[0]}")


def cmd_nonmpi(args):
    env = {"LD_PRELOAD": args.lib, "HIER_REPORT": "/nonexistent/dir/r.json", "HIER_DEBUG": "TRACE"}
    for cmd in (["/bin/true"], ["sh", "-c", "echo hello"], [sys.executable, "-c", "print('hello')"]):
        rc, out, err = run(cmd, env)
        if rc != 0 or err.strip() or (cmd[0] != "/bin/true" and out.strip() != "hello"):
            fail(f"{cmd} under LD_PRELOAD: rc={rc} out={out!r} err={err!r}")
    # The launcher itself preloaded (e.g. LD_PRELOAD exported before mpiexec), running a non-MPI program.
    base = [args.mpiexec] + (["--allow-run-as-root", "--oversubscribe"] if args.mpi == "openmpi" else [])
    rc, out, err = run(base + ["-n", "2", "sh", "-c", "echo hello"], {"LD_PRELOAD": args.lib})
    if rc != 0 or out.split() != ["hello", "hello"]:
        fail(f"launcher under LD_PRELOAD: rc={rc} out={out!r} err={err!r}")
    print("OK: /bin/true, sh, python and the launcher run unchanged with libhier preloaded")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["compare", "badenv", "wrongmpi", "nonmpi"])
    ap.add_argument("--mpi", required=True, choices=["openmpi", "mpich"])
    ap.add_argument("--mpiexec", required=True)
    ap.add_argument("--lib", required=True)
    ap.add_argument("--np", type=int, default=2)
    ap.add_argument("--expect", default="", help="MPI_X=n (at least n calls) or MPI_X==n (exactly), comma-separated")
    ap.add_argument("--env", action="append", default=[], help="K=V for the ranks of both runs")
    argv = sys.argv[1:]
    program = []
    if "--" in argv:  # everything after -- is the program and its arguments
        program = argv[argv.index("--") + 1:]
        argv = argv[:argv.index("--")]
    args = ap.parse_args(argv)
    args.program = program
    {"compare": cmd_compare, "badenv": cmd_badenv, "wrongmpi": cmd_wrongmpi, "nonmpi": cmd_nonmpi}[args.mode](args)


if __name__ == "__main__":
    main()
