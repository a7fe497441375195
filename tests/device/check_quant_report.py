#!/usr/bin/env python3
"""Checks rank 0's finalize report of a device_quant run (tests/device/quant_test.cpp): which path
the collectives on device buffers took, and that the quantized ones ran quantized, in every form:
  check_quant_report.py REPORT MODE [--mpi4] [--check]
(--mpi4: an MPI with persistent collectives, whose quantized persistent calls must be counted;
--check: HIER_QUANT_CHECK=on, every quantized call checked, device-bound ones included, which
were staged whole before: the calls must still count as hier_device_quant / hier_staged_quant,
and every collective's checked error must be lossy and within a loose int8 bound)."""
import json
import sys

path, mode = sys.argv[1], sys.argv[2]
mpi4 = "--mpi4" in sys.argv[3:]
check = "--check" in sys.argv[3:]
with open(path) as f:
    rep = json.load(f)
dev = rep.get("device", {}).get("device", {})
by_call, by_path = dev.get("by_call", {}), dev.get("by_path", {})
# staged: an MPI that is not GPU-aware, the message steps staged ("hier_staged..." keys).
pre = "hier_staged" if mode == "staged" else "hier_device"
quant = by_call.get(pre + "_quant", 0)
forms = {"": pre + "_quant", "I": pre + "_quant_nonblocking"}
if mpi4:
    forms["_init"] = pre + "_quant_persistent"
names = ("Allreduce", "Reduce_scatter_block", "Reduce_scatter", "Allgather")
algos = {}
for form in forms:
    for n in names:
        f = f"MPI_I{n.lower()}" if form == "I" else f"MPI_{n}{form}"
        algos[f] = rep["functions"].get(f, {}).get("algorithms", {})
problems = []
if mode == "nomem":
    # No device memory on rank 1 at any miss: every call went to the GPU-aware MPI on every rank.
    fb = rep.get("fallbacks", {}).get("scratch", {})
    if any(k.startswith("hier_device") for k in by_call) or fb.get("calls", 0) < 8 or fb.get("failed_here", 1):
        problems.append(f"fallbacks {json.dumps(rep.get('fallbacks'))}")
elif mode == "three_levels":
    # Quantized schedules need two levels: the three-level calls run libhier's exact schedules.
    if quant or by_call.get("hier_device", 0) < 8:
        problems.append("expected exact schedules on device buffers only")
else:
    # Per (count >= one block per rank, type, in place or not, collective) three calls quantized.
    want = "hier_int8" if mode.startswith(("int8", "staged")) else "hier_int4"
    for key in forms.values():
        if by_call.get(key, 0) < 16:
            problems.append(f"{by_call.get(key, 0)} calls counted as {key} (want >= 16)")
    # (staged: the calls left to the MPI, counts 0, run on host copies: "staged")
    if "staged" in by_call and mode != "staged":
        problems.append("some calls staged")
    for f, a in algos.items():
        if a.get(want, {}).get("calls", 0) < 4:
            problems.append(f"{f} ran {want} fewer than 4 times: {a}")
if not mpi4 and any(k.endswith("persistent") for k in by_call):
    problems.append("persistent calls counted on an MPI without them")
if by_path.get(pre, 0) != sum(n for k, n in by_call.items() if k.startswith(pre)):
    problems.append(f"by_path's {pre} is not the sum of its calls")
if mode == "staged" and (by_path.get("gpu_aware", 0) or by_path.get("hier_device", 0)):
    problems.append(f"device pointers handed to an MPI that is not GPU-aware: {by_path}")
if mode == "staged":
    # Only the records cross to the host: the quantized schedules' message steps on records
    # (sched::Step::bytes, the steps between nodes) stage records ("staged_bytes"' records), about
    # a quarter of the float values those steps would carry (int8 of float32 plus a scale per
    # block). Per rank this run stages 0.26 (Open MPI) to 0.39 (MPICH) times the quantized calls' user bytes as records;
    # staging the values there instead would be ~4 times that, and no records at all.
    sb = rep.get("device", {}).get("staged_bytes", {})
    rec = sb.get("to_host", {}).get("records", 0)
    user = sum(a.get("hier_int8", {}).get("bytes", 0) for a in algos.values())
    if not rec or not sb.get("to_device", {}).get("records", 0) or not user or rec > 0.6 * user:
        problems.append(f"records staged to host {rec} B for {user} B of quantized calls (want 0 < records <= 0.6x): "
                        f"{json.dumps(sb)}")
if check:
    for name, c in rep.get("quantization", {}).get("collectives", {}).items():
        q = c.get("int8", 0) + c.get("int4", 0)
        chk = c.get("check", {})
        if not q or chk.get("calls", 0) != q:
            problems.append(f"{name}: {chk.get('calls', 0)} of {q} quantized calls checked")
        elif not 0 < (chk.get("max_rel_error") or float("nan")) < 0.05:  # (NaN: null in the report)
            problems.append(f"{name}: checked error {chk.get('max_rel_error')} not lossy within 0.05")
    # (before, a checked call on device buffers was staged whole: "staged"; in staged mode only
    # the count-0 calls, which libhier leaves to the MPI, are: 24 on Open MPI, 32 on MPICH with
    # its 16-bit floats)
    if mode == "staged" and by_call.get("staged", 0) > 64:
        problems.append(f"{by_call.get('staged')} calls staged whole")
if problems:
    sys.exit(f"{path}: {mode}: " + "; ".join(problems) + f"; device calls {json.dumps(by_call)}")
print(f"{path}: {mode}: {by_call}")
