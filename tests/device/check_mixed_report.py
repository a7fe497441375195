#!/usr/bin/env python3
"""Checks one rank's finalize report after a mixed host/device run (mixed_test.cpp):
  check_mixed_report.py REPORT MODE
MODE says which path that rank's device buffers took, which the report's "device" section must
show call by call: staged (copied to host, libhier's schedules), aware (device pointers given to
a GPU-aware MPI), kernels (libhier's schedules bound to the device buffers, the GPU module's
kernels for the local steps, on a GPU-aware MPI), and what else the run must show (the hierarchy it ran on, the algorithms)."""
import json
import sys

path, mode = sys.argv[1], sys.argv[2]
mpi4 = "--mpi4" in sys.argv[3:]  # the MPI has persistent collectives (MPICH 4; not Open MPI 4.1)
with open(path) as f:
    rep = json.load(f)
dev = (rep.get("device") or {}).get("device", {})
by_call = dev.get("by_call", {})
colls = ["allreduce", "reduce", "bcast", "allgather", "allgatherv", "reduce_scatter_block", "reduce_scatter",
         "alltoall"]
algos = rep["functions"]["MPI_Allreduce"]["algorithms"]
shapes = rep.get("topology", {}).get("communicators", {})
problems = []
# The section counts every call by path, and the paths add up to the calls.
by_path = dev.get("by_path", {})
if sorted(by_path) != ["gpu_aware", "hier_device", "hier_staged", "kernels", "passed", "staged"] or \
        sum(by_path.values()) != dev.get("calls"):
    problems.append(f"by_path {by_path} does not split the {dev.get('calls')} calls into staged / gpu_aware / "
                    "passed / kernels / hier_device / hier_staged")
if (by_path.get("hier_device", 0) > 0) != (mode == "kernels"):
    problems.append(f"{by_path.get('hier_device', 0)} calls ran libhier's schedules on device buffers")
if (by_path.get("hier_staged", 0) > 0) != (mode == "staged_kernels"):
    problems.append(f"{by_path.get('hier_staged', 0)} calls ran libhier's schedules on device buffers, staged")
if by_path.get("staged", 0) != sum(n for k, n in by_call.items() if k.startswith("staged")):
    problems.append("by_path staged differs from the staged calls")
staged = by_call.get("staged", 0)
aware = [k for k in colls if by_call.get(k, 0) > 0]
if mode in ("late_staged", "disagree_staged"):
    if staged < 1:
        problems.append("no staged collective")
    if aware:
        problems.append(f"device buffers given to an MPI that is not GPU-aware: {aware}")
if mode in ("aware", "disagree_aware"):
    missing = [k for k in colls if by_call.get(k, 0) < 1]
    if missing:
        problems.append(f"collectives not counted as passed to the GPU-aware MPI: {missing}")
    if staged:
        problems.append(f"{staged} collectives staged on a GPU-aware MPI")
# A persistent collective left to an MPI that is not GPU-aware (mixed_test's MixedPersistent): the
# MPI's own on host copies kept with the request, never its device pointers.
if by_path.get("passed", 0):
    problems.append(f"{by_path.get('passed', 0)} calls passed to the MPI as is, expected none")
want_copies = 1 if mpi4 and mode in ("late_staged", "staged_kernels") else 0
if by_call.get("staged_persistent_mpi", 0) != want_copies:
    problems.append(f"{by_call.get('staged_persistent_mpi', 0)} persistent calls left to the MPI on host copies, "
                    f"expected {want_copies}")
if mode in ("aware", "disagree_aware") and by_path.get("gpu_aware", 0) < len(colls):
    problems.append("GPU-aware calls not counted under by_path gpu_aware")
if mode == "late_staged":
    # HIER_LEVELS=auto on the Frontier node XML, 2 ranks per GCD: gcd:2,gpu:4 inside the node.
    if not any(k.startswith("8 ranks: gcd:2 x gpu:2 x world:2") for k in shapes):
        problems.append(f"no communicator on gcd:2 x gpu:2 x world:2: {shapes}")
    if algos.get("hier", {}).get("calls", 0) < 1:
        problems.append("no MPI_Allreduce ran libhier's hierarchical schedule")
if mode in ("kernels", "staged_kernels"):
    # Every collective of the test ran on the device buffers where this rank's were all device
    # memory, the nonblocking ones (MPI_Iallreduce, MPI_Ibcast) too; staged_kernels: an MPI
    # that is not GPU-aware, so never device pointers to it, their message steps staged.
    pre = "hier_device" if mode == "kernels" else "hier_staged"
    if by_call.get(pre, 0) < 8 or algos.get("hier", {}).get("calls", 0) < 1:
        problems.append("too few calls ran libhier's schedules on device buffers")
    if by_call.get(pre + "_nonblocking", 0) < 1:
        problems.append("no nonblocking call ran libhier's schedule on device buffers")
    if mode == "staged_kernels" and (aware or by_path.get("gpu_aware", 0)):
        problems.append(f"device buffers given to an MPI that is not GPU-aware: {aware}")
if mode.startswith("disagree") and any(a != "flat" for a in algos):
    problems.append(f"HIER_GPU_AWARE differs between ranks, yet MPI_Allreduce ran {sorted(algos)}")
if problems:
    sys.exit(f"{path} ({mode}): " + "; ".join(problems) + f"\n  device: {json.dumps(rep.get('device'))}"
             f"\n  MPI_Allreduce: {json.dumps(algos)}\n  communicators: {json.dumps(shapes)}")
print(f"{path} ({mode}): device calls by path {by_call}; MPI_Allreduce {sorted(algos)}; communicators {shapes}")
