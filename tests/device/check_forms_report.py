#!/usr/bin/env python3
"""Checks rank 0's finalize report after a forms_test.cpp run (device buffers in every form on a
device_hier communicator):
  check_forms_report.py REPORT [--mpi4] [--thread]
The "device" section must count blocking, nonblocking and (--mpi4: an MPI with persistent
collectives) persistent calls run by libhier's schedules bound to the device buffers, none staged;
every collective the test makes, in both forms, must have run libhier's hierarchical schedule
("hier" among its function's algorithms), alltoall / gather / scatter / allgatherv included; with
--thread, the requests progressed on libhier's progress thread."""
import json
import sys

path = sys.argv[1]
mpi4 = "--mpi4" in sys.argv[2:]
thread = "--thread" in sys.argv[2:]
# --staged: an MPI that is not GPU-aware: the same calls with their message steps staged through
# pinned host memory ("hier_staged..."), none on device pointers handed to the MPI, and the large
# allreduce / bcast pipelined (HIER_CHUNK) so that staged steps ran in waves.
staged_steps = "--staged" in sys.argv[2:]
pre = "hier_staged" if staged_steps else "hier_device"
with open(path) as f:
    rep = json.load(f)
dev = (rep.get("device") or {}).get("device", {})
by_call = dev.get("by_call", {})
problems = []
# OneAtATime: 25 calls per count and form (10 collectives, in place where they have it, 2 roots
# for the 4 rooted ones); counts 0 go to the MPI, 3 counts remain. ManyOutstanding adds 18
# nonblocking calls per count; Persistent 21 reductions, the float sums 4.
want = {pre: 75, pre + "_nonblocking": 120}
if mpi4:
    # Persistent: 10 collectives x 3 counts (in place where they have it, root the last rank:
    # 18 cases per count), the float sums 4.
    want[pre + "_persistent"] = 58
for key, least in want.items():
    if by_call.get(key, 0) < least:
        problems.append(f"{by_call.get(key, 0)} calls counted as {key}, expected at least {least}")
if not mpi4 and pre + "_persistent" in by_call:
    problems.append("persistent calls counted on an MPI without them")
# (--staged: the calls libhier leaves to the MPI, counts 0 and a flat plan, run on whole host
# copies there, "staged"; a GPU-aware MPI would have had their device pointers)
# (staged_persistent: PersistentMixedHostAndDevice's host copies kept with the request, 2 calls)
staged = [k for k in by_call
          if k.startswith("staged") and not (staged_steps and k == "staged") and k != "staged_persistent"]
if mpi4 and by_call.get("staged_persistent", 0) != 2:
    problems.append(f"{by_call.get('staged_persistent', 0)} persistent calls on host copies kept with the request, want 2")
if staged:
    problems.append(f"device buffers staged through host copies: {staged}")
if dev.get("by_path", {}).get(pre) != sum(n for k, n in by_call.items() if k.startswith(pre)):
    problems.append(f"by_path {pre} {dev.get('by_path')} is not the sum of the {pre} keys")
if staged_steps and (dev.get("by_path", {}).get("gpu_aware") or dev.get("by_path", {}).get("hier_device")):
    problems.append(f"device pointers handed to an MPI that is not GPU-aware: {dev.get('by_path')}")
if staged_steps and not any(v.get("chunks", 0) > v.get("calls", 0) for v in (rep.get("pipeline") or {}).values()):
    problems.append(f"no call ran pipelined: {json.dumps(rep.get('pipeline'))}")
funcs = rep.get("functions", {})
names = ["Allreduce", "Reduce", "Reduce_scatter_block", "Reduce_scatter", "Allgather", "Allgatherv", "Bcast",
         "Alltoall", "Gather", "Scatter"]
for fn in [f"MPI_{n}" for n in names] + [f"MPI_I{n.lower()}" for n in names]:
    hier = funcs.get(fn, {}).get("algorithms", {}).get("hier", {}).get("calls", 0)
    if hier < 1:
        problems.append(f"{fn} never ran libhier's schedule: {json.dumps(funcs.get(fn))}")
if mpi4:  # every persistent form ran libhier's schedule, movement collectives included
    for fn in [f"MPI_{n}_init" for n in names]:
        if funcs.get(fn, {}).get("algorithms", {}).get("hier", {}).get("calls", 0) < 1:
            problems.append(f"{fn} never ran libhier's schedule: {json.dumps(funcs.get(fn))}")
nb = rep.get("nonblocking") or {}
if thread and (nb.get("progress") != "thread" or nb.get("thread_rounds", 0) < 1):
    problems.append(f"no progress thread ran: {json.dumps(nb)[:300]}")
if problems:
    sys.exit(f"{path}: " + "; ".join(problems) + f"\n  device: {json.dumps(rep.get('device'))}")
print(f"{path}: device calls {by_call}")
