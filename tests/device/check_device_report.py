#!/usr/bin/env python3
"""Checks the finalize report's "device" section of a device_buffers run (rank 0)."""
import json
import os
import re
import sys

path, mode = sys.argv[1], sys.argv[2]


def dev_of(p):
    with open(p) as f:
        d = json.load(f).get("device")
    if d is None:
        sys.exit(f"{p}: no 'device' section")
    return d


with open(path) as f:
    rep = json.load(f)
# The dtype suites' device variants (tests/dtype/CMakeLists.txt, <check>_<aware|kernels|staged>):
# the calls rank 0's report must count, rank 1's (the receiver's, argv[3]) where given, and the
# paths that must count none. aware: a GPU-aware MPI and the module (no host copies; the
# MPI_BOTTOM cases, which went to the MPI, skip: the stand-in MPI cannot translate them);
# kernels: not GPU-aware, the module (contiguous messages and MPI_BOTTOM types staged, no device
# pointer to the MPI); staged: no module, all host copies.
_k_send, _k_recv = ["kernel_send", "kernel_isend", "kernel_sendrecv"], ["kernel_recv", "kernel_irecv", "kernel_sendrecv"]
dtype_runs = {
    "pack_aware": (["kernel_pack", "kernel_unpack"], None, ["staged", "passed"]),
    "dtype_p2p_aware": (_k_send, _k_recv, ["staged", "passed"]),
    "dtype_p2p_kernels": (_k_send + ["staged_send"], _k_recv + ["staged_recv"], ["gpu_aware", "passed"]),
    "dtype_p2p_staged": (["staged_send", "staged_isend", "staged_sendrecv"],
                         ["staged_recv", "staged_irecv", "staged_sendrecv"], ["gpu_aware", "passed", "kernels"]),
    "dtype_forms_aware": ([], None, ["staged", "passed", "kernels"]),
    "dtype_forms_kernels": (["staged_pack", "staged_unpack"], None, ["gpu_aware", "passed"]),
    "dtype_forms_staged": (["staged_pack", "staged_unpack"], None, ["gpu_aware", "passed", "kernels"]),
}
if mode in dtype_runs:
    want0, want1, none = dtype_runs[mode]
    for p, want in ((path, want0), (sys.argv[3] if want1 else None, want1)):
        if p is None:
            continue
        with open(p) as f:
            if not want and "device" not in json.load(f):
                print(f"{p}: no device calls counted, none wanted")  # (dtype_forms_aware)
                continue
        d = dev_of(p)["device"]
        missing = [k for k in want if d["by_call"].get(k, 0) < 1]
        ran = [k for k in none if d["by_path"].get(k, 0)]
        if missing or ran:
            sys.exit(f"{p}: {mode}: missing {missing} or another path ran ({ran}): {json.dumps(d)}")
        print(f"{p}: {d['by_call']}")
    sys.exit(0)
dev = dev_of(path)
by_call = dev["device"]["by_call"]
# MPI_Pack / MPI_Unpack of device buffers (device_pack_test): by the GPU module's kernels, or staged.
if mode.startswith("pack_"):
    want = {"pack_kernels": ["kernel_pack", "kernel_unpack"], "pack_staged": ["staged_pack", "staged_unpack"]}[mode]
    # With a module, the types without an exact form (the MPI packs those) are still staged.
    other = {"pack_kernels": [], "pack_staged": ["kernel_pack", "kernel_unpack"]}[mode]
    missing = [k for k in want if by_call.get(k, 0) < 1]
    if missing or any(k in by_call for k in other + ["pack", "unpack"]):
        sys.exit(f"{path}: {mode}: missing {missing} or another path ran: {json.dumps(dev)}")
    print(f"{path}: {by_call}")
    sys.exit(0)
# Non-contiguous point-to-point between device buffers (device_p2p_test): rank 0's report (the
# sends) and rank 1's (the receives); by the GPU module's kernels, or staged without a module.
if mode.startswith("p2p_"):
    kernels = mode.startswith("p2p_kernels")
    receiver = dev_of(sys.argv[3])["device"]["by_call"]
    pre = "kernel_" if kernels else "staged_"
    # Both ranks also run MPI_Sendrecv(_replace), and with an MPI 4 library (MPICH 4 here) the _c
    # forms of all of them.
    large = rep.get("mpi_library", "").startswith("MPICH Version:\t4")
    both = ["sendrecv", "sendrecv_replace"] + (["sendrecv_c", "sendrecv_replace_c"] if large else [])
    sends = ["send", "isend"] + (["send_c", "isend_c"] if large else [])
    recvs = ["recv", "irecv"] + (["recv_c", "irecv_c"] if large else [])
    for calls, names in ((by_call, sends + both), (receiver, recvs + both)):
        missing = [pre + k for k in names if calls.get(pre + k, 0) < 1]
        # With a module, the types without an exact form (the MPI packs those) are still staged.
        other = [k for k in calls if k.startswith("kernel_")] if not kernels else [k for k in names if k in calls]
        if missing or other:
            sys.exit(f"{mode}: missing {missing} or another path ran ({other}): {calls}")
    print(f"{mode}: sender {by_call}, receiver {receiver}")
    sys.exit(0)
p2p = ["send", "recv", "isend", "irecv", "sendrecv", "pack", "unpack"]
colls = ["allreduce", "reduce", "bcast", "allgather", "allgatherv", "reduce_scatter_block", "reduce_scatter",
         "alltoall"]
# The collectives libhier forwards to the MPI (src/core/forwarded_colls.def): handed to a GPU-aware
# MPI (their own key), or run by the MPI on host copies ("staged_" + key) where it is not.
# (read from that table, so that the two cannot drift apart)
_def = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "src", "core", "forwarded_colls.def")
with open(_def) as _f:
    forwarded = re.findall(r"^HIER_FORWARDED_COLL\([^,]+,[^,]+,[^,]+,\s*(\w+)\)", _f.read(), re.M)
if not forwarded:  # a parse that found nothing would make the checks below vacuous
    sys.exit(f"{_def}: no HIER_FORWARDED_COLL rows read")
staged_forwarded = ["staged_" + k for k in forwarded]
# Preloaded (GPU-aware MPI): collectives pass through (one count per call family); late: they
# are staged; unaware (an MPI that is not GPU-aware): collectives, blocking p2p and MPI_Pack /
# MPI_Unpack are staged, MPI_Isend / MPI_Irecv too.
staged_p2p = ["staged_send", "staged_recv", "staged_sendrecv", "staged_pack", "staged_unpack", "staged_isend",
              "staged_irecv"]
# kernels (GPU-aware MPI, the simulated GPU module): every collective of the test (allreduce,
# reduce, bcast, allgather(v), reduce_scatter(_block), alltoall) runs libhier's schedules on the
# device buffers; MPI_Pack / MPI_Unpack and the non-contiguous sends and receives (MPI_Sendrecv
# too) run as kernels.
kernel_p2p = ["kernel_send", "kernel_recv", "kernel_isend", "kernel_irecv", "kernel_sendrecv", "kernel_pack",
              "kernel_unpack"]
# staged (an MPI that is not GPU-aware, the simulated GPU module): the collectives run libhier's
# schedules bound to the device buffers with their message steps staged through pinned host
# memory ("hier_staged"); staged_nomem: no staging memory on rank 1, so on host copies ("staged").
# hip_*: the same as without the prefix, with the HIP runtime (tests/device/fake_hip.cpp).
runtime = "hip" if mode.startswith("hip_") else "cuda"
mode = mode.removeprefix("hip_")
want = {"preloaded": p2p + colls + forwarded, "late": p2p + ["staged"] + forwarded,
        "kernels": kernel_p2p + ["hier_device"] + forwarded,
        "kernels_nomem": kernel_p2p + colls + forwarded,
        "staged": ["hier_staged"] + staged_forwarded,
        "staged_nomem": ["staged"] + staged_forwarded}.get(mode, staged_p2p + ["staged"] + staged_forwarded)
missing = [k for k in want if by_call.get(k, 0) < 1]
if dev["runtime"] != runtime or missing:
    sys.exit(f"{path}: runtime {dev['runtime']}, missing counts for {missing}: {json.dumps(dev)}")
unaware = mode.startswith(("unaware", "staged"))
if unaware and any(k in by_call for k in colls + p2p + forwarded):
    sys.exit(f"{path}: device buffers handed to an MPI that is not GPU-aware: {json.dumps(dev)}")
if mode == "kernels" and (by_call["hier_device"] < 9 or "staged" in by_call or "alltoall" in by_call
                          or "allgatherv" in by_call):
    sys.exit(f"{path}: too few collectives on device buffers, or some staged or handed to the MPI: {json.dumps(dev)}")
if mode == "kernels_nomem":
    # No device scratch on rank 1: every schedule's acquisition failed somewhere, so the calls
    # went to the GPU-aware MPI on every rank (rank 0 counts them as failed elsewhere).
    fb = rep.get("fallbacks", {}).get("scratch", {})
    if "hier_device" in by_call or "staged" in by_call or fb.get("calls", 0) < 6 or fb.get("failed_here", 1):
        sys.exit(f"{path}: kernels_nomem: {json.dumps(dev)}; fallbacks {json.dumps(rep.get('fallbacks'))}")
# (one allreduce runs flat, on host copies: the one the kernels mode counts as "allreduce"; and
# the calls of types that are not dense, on host copies: AllgatherTypeAfterPointer's allgather,
# NonblockingNotDenseStaysNonblocking's three)
if mode == "staged" and (by_call["hier_staged"] < 9 or by_call.get("staged", 0) > 5
                         or any(k.startswith("hier_device") for k in by_call)):
    sys.exit(f"{path}: too few collectives staged step by step, or some copied whole: {json.dumps(dev)}")
if mode == "staged_nomem":
    # No staging memory on rank 1: every schedule's acquisition failed somewhere, so the calls
    # went to the MPI on host copies on every rank (rank 0 counts them as failed elsewhere).
    fb = rep.get("fallbacks", {}).get("scratch", {})
    if any(k.startswith("hier_") for k in by_call) or fb.get("calls", 0) < 6 or fb.get("failed_here", 1):
        sys.exit(f"{path}: staged_nomem: {json.dumps(dev)}; fallbacks {json.dumps(rep.get('fallbacks'))}")
# MPI 4 (MPICH here): the persistent allgather ran libhier's schedule on host copies kept with the
# request (unaware, no module) or bound to the device (staged); AllgatherTypeAfterPointer's (a
# type that is not dense) on host copies kept with the request. PersistentLeftToMpi's allreduce
# and reduce, which libhier leaves to the MPI, ran as the MPI's own on host copies kept with the
# request (staged_persistent_mpi) wherever the MPI is not GPU-aware.
if rep.get("mpi_library", "").startswith("MPICH Version:\t4"):
    key = {"unaware": ("staged_persistent", 2), "unaware_quant": ("staged_persistent", 2),
           "staged": ("hier_staged_persistent", 1)}
    if mode in key and by_call.get(key[mode][0], 0) != key[mode][1]:
        sys.exit(f"{path}: the persistent allgathers did not count as {key[mode]}: {json.dumps(dev)}")
    if mode not in ("preloaded", "late", "kernels", "kernels_nomem") and by_call.get("staged_persistent_mpi", 0) != 2:
        sys.exit(f"{path}: the persistent calls left to the MPI did not run on host copies: {json.dumps(dev)}")
if mode not in ("preloaded", "kernels", "kernels_nomem", "staged") and by_call["staged"] < len(colls):
    sys.exit(f"{path}: only {by_call['staged']} staged collectives: {json.dumps(dev)}")
# Which algorithms ran MPI_Allreduce: the staged calls must have run libhier's schedules where
# the mode forces them (HIER_ALGO=hier), quantized where it asks for int8.
algos = rep["functions"]["MPI_Allreduce"]["algorithms"]
need = {"unaware": "hier", "unaware_quant": "hier_int8", "kernels": "hier", "staged": "hier"}.get(mode)
if need and algos.get(need, {}).get("calls", 0) < 1:
    sys.exit(f"{path}: no MPI_Allreduce ran as {need}: {json.dumps(algos)}")
# The same calls by path: staged through host copies, handed to the GPU-aware MPI, packed by the
# kernels, run by libhier's schedules on device buffers, or passed as is to an MPI that is not
# GPU-aware (none in these runs), adding up to the calls.
by_path = dev["device"].get("by_path", {})
staged_calls = sum(n for k, n in by_call.items() if k.startswith("staged"))
hier_calls = sum(n for k, n in by_call.items() if k.startswith("hier_device"))
hier_staged = sum(n for k, n in by_call.items() if k.startswith("hier_staged"))
kernel_calls = sum(n for k, n in by_call.items() if k.startswith("kernel"))
want_path = {"staged": staged_calls,
             "gpu_aware": dev["device"]["calls"] - staged_calls - hier_calls - hier_staged - kernel_calls,
             "passed": 0, "kernels": kernel_calls, "hier_device": hier_calls, "hier_staged": hier_staged}
if by_path != want_path or (unaware and by_path["gpu_aware"]):
    sys.exit(f"{path}: by_path {by_path}, expected {want_path}")
print(f"{path}: {dev['device']['calls']} device calls: {by_call}; MPI_Allreduce: {algos}")
