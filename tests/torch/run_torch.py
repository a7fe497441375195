#!/usr/bin/python3
"""examples/torch_train.py (PyTorch + mpi4py) under libhier against the MPI alone, in all three
modes (ddp, ddp --overlap, zero), on 4 ranks faked as 2 nodes x 2 (HIER_LEVELS=node:2,
HIER_ALGO=hier so that libhier takes its schedules and, with HIER_QUANT, quantizes).

Three MPI jobs, each running the three modes one after the other in one process per rank (the
driver imports torch_train and calls its main), to keep the start-up of Python and torch to three:
  mpi    no preload
  exact  libhier
  int8   libhier, HIER_QUANT=int8, HIER_QUANT_FEEDBACK=on
Checks (docs/pytorch.md, "Exactness"):
  - every job: every rank ends with rank 0's parameters, every loss finite;
  - exact: each step's loss within a relative 1e-5 of the MPI alone's (the sums' order differs
    from Open MPI's, nothing else does: the differences seen are ~1e-8);
  - int8: the loss decreases (mean of the last 3 steps below the first step's by 1%), and each
    step's loss is within a relative 2% of the MPI alone's; libhier's report counts int8 calls of
    MPI_Allreduce and MPI_Reduce_scatter_block (the quantized path really ran).
A quantized reduction that returns garbage or zeros fails the int8 checks on the losses (shown in
bench/RESULTS.md, "Session 20, torch", with every block's scale forced to zero).

  run_torch.py --mpiexec mpiexec.openmpi --lib build/openmpi/libhier.so [--np 4] [--steps 10]
Exit 77 (ctest SKIP) when /usr/bin/python3 lacks torch or mpi4py.
"""
import argparse
import glob
import json
import math
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
EXAMPLE = os.path.join(HERE, "..", "..", "examples")
PY = "/usr/bin/python3"
MODES = {"ddp": ["--mode", "ddp"], "overlap": ["--mode", "ddp", "--overlap", "--bucket-mib", "0.1"],
         "zero": ["--mode", "zero"]}
EXACT_REL = 1e-5
INT8_REL = 0.02


def ranks_main(out, steps):
    """Inside the MPI job: the three modes, one after the other; rank 0 writes the records."""
    sys.path.insert(0, EXAMPLE)
    import torch_train
    model = ["--dim", "64", "--layers", "1", "--ctx", "32", "--batch", "2", "--warmup", "1",
             "--lr", "3e-3", "--steps", str(steps), "--print-every", "0"]
    recs = {name: torch_train.main(model + extra) for name, extra in MODES.items()}
    from mpi4py import MPI
    if MPI.COMM_WORLD.Get_rank() == 0:
        with open(out, "w") as f:
            json.dump(recs, f)


def fail(msg):
    print("FAIL:", msg, flush=True)
    sys.exit(1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ranks-out", help=argparse.SUPPRESS)
    ap.add_argument("--mpiexec", default="mpiexec.openmpi")
    ap.add_argument("--lib")
    ap.add_argument("--np", type=int, default=4)
    ap.add_argument("--steps", type=int, default=8)
    a = ap.parse_args()
    if a.ranks_out:
        return ranks_main(a.ranks_out, a.steps)
    if not a.lib:
        ap.error("--lib is required")
    probe = subprocess.run([PY, "-c", "import torch, mpi4py"], capture_output=True, text=True)
    if probe.returncode != 0:
        print("SKIP: /usr/bin/python3 cannot import torch and mpi4py (Debian: apt-get install "
              "python3-torch python3-mpi4py):", probe.stderr.strip().splitlines()[-1:])
        sys.exit(77)

    tmp = tempfile.mkdtemp(prefix="hier-torch-")
    jobs = {"mpi": ("", {}),
            "exact": (a.lib, {}),
            "int8": (a.lib, {"HIER_QUANT": "int8", "HIER_QUANT_FEEDBACK": "on"})}
    recs = {}
    for name, (lib, extra) in jobs.items():
        env = {k: v for k, v in os.environ.items() if not k.startswith("HIER_") and k != "LD_PRELOAD"}
        env.update({"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
                    "HIER_LEVELS": "node:2", "HIER_ALGO": "hier",
                    "HIER_REPORT": os.path.join(tmp, f"{name}-%r.json"), **extra})
        fwd = [x for k in sorted(env) if k.startswith("HIER_") for x in ("-x", k)]
        out = os.path.join(tmp, f"{name}.json")
        cmd = [a.mpiexec, "--allow-run-as-root", "--oversubscribe", "--bind-to", "none",
               "-x", f"LD_PRELOAD={lib}", *fwd, "-n", str(a.np),
               PY, os.path.abspath(__file__), "--ranks-out", out, "--steps", str(a.steps)]
        p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
        if p.returncode != 0 or not os.path.exists(out):
            fail(f"{name} job: exit {p.returncode}\n{p.stdout[-2000:]}\n{p.stderr[-3000:]}")
        with open(out) as f:
            recs[name] = json.load(f)
        for mode, r in recs[name].items():
            print(f"{name:>5} {mode:>7}: loss " + " ".join(f"{x:.6f}" for x in r["loss"]))

    ok = True
    for mode in MODES:
        ref = recs["mpi"][mode]["loss"]
        for name in jobs:
            r = recs[name][mode]
            if not r["same_params"]:
                fail(f"{name} {mode}: the ranks ended with different parameters")
            if not all(math.isfinite(x) for x in r["loss"]):
                fail(f"{name} {mode}: a loss is not finite: {r['loss']}")
        ex = max(abs(x - y) / abs(y) for x, y in zip(recs["exact"][mode]["loss"], ref))
        q = recs["int8"][mode]["loss"]
        q_rel = max(abs(x - y) / abs(y) for x, y in zip(q, ref))
        last = sum(q[-3:]) / 3
        print(f"{mode}: exact vs MPI alone: largest relative difference {ex:.2e} (bound {EXACT_REL:g})"
              f"{' (bit-identical)' if recs['exact'][mode]['loss'] == ref else ''}; int8: {q_rel:.2e} "
              f"(bound {INT8_REL:g}), loss {q[0]:.4f} -> {last:.4f} (last 3 steps)")
        if ex > EXACT_REL:
            print(f"FAIL: {mode}: libhier exact differs from the MPI alone by {ex:.2e} > {EXACT_REL:g}")
            ok = False
        if q_rel > INT8_REL:
            print(f"FAIL: {mode}: int8 differs from the MPI alone by {q_rel:.2e} > {INT8_REL:g}")
            ok = False
        if not last < 0.99 * q[0]:
            print(f"FAIL: {mode}: int8 loss did not decrease ({q[0]:.4f} -> {last:.4f})")
            ok = False

    # The quantized path ran: rank 0's report counts int8 calls.
    with open(os.path.join(tmp, "int8-0.json")) as f:
        qrep = json.load(f).get("quantization", {}).get("collectives", {})
    for op in ("allreduce", "reduce_scatter_block"):
        n = qrep.get(op, {}).get("int8", 0)
        print(f"int8 report: {op}: {n} quantized calls")
        if n <= 0:
            print(f"FAIL: libhier's report shows no int8 {op} (the quantized path did not run): {qrep}")
            ok = False
    for f in glob.glob(os.path.join(tmp, "*")):
        os.remove(f)
    os.rmdir(tmp)
    print("PASS" if ok else "FAILED")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
