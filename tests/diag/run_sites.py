#!/usr/bin/env python3
"""Call sites of a program that does not call libhier's C wrappers itself: a Fortran program
(sites.f90; libhier's Fortran wrapper under Open MPI, MPICH's libmpifort under MPICH) or an mpi4py
script (sites.py; Debian's mpi4py is built for Open MPI only). Runs it on 2 ranks with libhier
preloaded, HIER_WATCHDOG=1 and HIER_REPORT; rank 1 sleeps before the last allreduce. Checks:
  - one hang report, whose waiting rank 0 is at the program's own hang line (file:line of SRC);
  - every rank's finalize report: `call_sites` names the program's lines, with the calls made
    there (the allreduce in the loop 3 times, the barrier, the allreduce of the hang once), and
    no site in libhier, the MPI or mpi4py.

usage: run_sites.py --mpi openmpi|mpich --mpiexec PATH --lib libhier.so --src SRC -- COMMAND...
"""
import argparse
import glob
import json
import os
import subprocess
import tempfile
import time

from common import fail, launch

NP = 2


def site_line(src, marker):
    """"file:N": the line of `src` that carries the marker (`! SITE:x` or `# SITE:x`)."""
    with open(src) as f:
        for i, line in enumerate(f, 1):
            if line.rstrip().endswith(f"SITE:{marker}"):
                return f"{os.path.basename(src)}:{i}"
    fail(f"no SITE:{marker} in {src}")


def main():
    ap = argparse.ArgumentParser()
    for k in ("mpi", "mpiexec", "lib", "src"):
        ap.add_argument("--" + k, required=True)
    ap.add_argument("--test-preload", default="")
    ap.add_argument("command", nargs="+")
    a = ap.parse_args()

    tmp = tempfile.mkdtemp(prefix="hier-sites-")
    wake = f"{tmp}/wake"
    preload = f"{a.lib}:{a.test_preload}" if a.test_preload else a.lib
    env_vars = {"LD_PRELOAD": preload, "HIER_WATCHDOG": "1", "HIER_REPORT": f"{tmp}/r%r.json"}
    cmd, env = launch(a.mpi, a.mpiexec, env_vars, NP, a.command + [wake])
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                         start_new_session=True)
    deadline = time.monotonic() + 60
    hang_files = lambda: sorted(glob.glob(f"{tmp}/hier-hang-*.json"))
    while time.monotonic() < deadline and p.poll() is None and not hang_files():
        time.sleep(0.05)
    open(wake, "w").close()  # (the hang file is read once the job has ended)
    try:
        out, _ = p.communicate(timeout=max(5, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, 9)
        out, _ = p.communicate()
        print(out)
        fail("the job did not end")
    print(out)
    if p.returncode != 0 or out.count("DONE rank") != NP:
        fail(f"the job must finish normally: rc {p.returncode}")

    src = os.path.basename(a.src)
    loop, barrier, hang = (site_line(a.src, m) for m in ("loop", "barrier", "hang"))
    files = hang_files()
    if len(files) != 1:
        fail(f"expected one hang report, got {files}")
    with open(files[0]) as f:
        j = json.load(f)
    print(json.dumps(j, indent=1))
    waiting = {w["rank"]: w for w in j["waiting"]}
    if j["collective"] != "MPI_Allreduce" or sorted(waiting) != [0] or [m["rank"] for m in j["missing"]] != [1]:
        fail(f"the hang: {j['collective']}, waiting {sorted(waiting)}, missing {j['missing']}")
    if not waiting[0]["call_site"].startswith(hang + " "):
        fail(f"rank 0 waits at {waiting[0]['call_site']!r}, expected the program's line {hang}")
    print(f"hang report: rank 0 at {waiting[0]['call_site']}")

    for r in range(NP):
        with open(f"{tmp}/r{r}.json") as f:
            sites = json.load(f)["call_sites"]["sites"]
        got = {(s["function"], s["site"].split(" ")[0]): s["calls"] for s in sites}
        print(f"rank {r} call_sites: {got}")
        want = {("MPI_Allreduce", loop): 3, ("MPI_Barrier", barrier): 1, ("MPI_Allreduce", hang): 1}
        for k, n in want.items():
            if got.get(k) != n:
                fail(f"rank {r}: call_sites has {got.get(k)} calls at {k}, expected {n}")
        others = [k for k in got if not k[1].startswith(src + ":")]
        if others:
            fail(f"rank {r}: sites outside {src}: {others}")
    print(f"PASS: the hang report and call_sites name {src}'s lines")


if __name__ == "__main__":
    main()
