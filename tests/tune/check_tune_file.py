#!/usr/bin/env python3
"""Checks a file written by hier-tune against docs/tune-file.md (libhier-tune/2).
usage: check_tune_file.py FILE NODES RANKS_PER_NODE MPI_FAMILY [OPTS]
(OPTS, comma-separated: ladder: the file must have levels.X.ladder, as hier-tune --ladder writes;
steps: levels.X.steps, as hier-tune --level-steps writes; hier: hier_measured, as hier-tune
--hier writes; device: dtype.device and the device section, as hier-tune writes with a GPU runtime and module loaded;
without: it must not)"""
import json, math, os, sys

def fail(msg):
    print(f"check_tune_file: {msg}")
    sys.exit(1)

def num(x, where, positive=False):
    if not isinstance(x, (int, float)) or isinstance(x, bool) or not math.isfinite(x) or x < 0:
        fail(f"{where} = {x!r}: not a finite number >= 0")
    if positive and x <= 0:
        fail(f"{where} = {x!r}: not > 0")

path, nodes, ppn, family = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
opts = sys.argv[5].split(",") if len(sys.argv) > 5 else []
want_ladder, want_steps, want_hier = "ladder" in opts, "steps" in opts, "hier" in opts
want_device = "device" in opts  # dtype.device: hier-tune ran with a GPU runtime and module
j = json.load(open(path))
if j.get("format") != "libhier-tune/2":
    fail(f"format {j.get('format')!r}")
m = j["machine"]
if m.get("mpi_family") != family:
    fail(f"mpi_family {m.get('mpi_family')!r}, expected {family}")
if m.get("nodes") != nodes or m.get("ranks_per_node") != ppn:
    fail(f"shape {m.get('nodes')} x {m.get('ranks_per_node')}, expected {nodes} x {ppn}")
for k in ("host", "mpi_library", "measured", "tool"):
    if not isinstance(m.get(k), str) or not m[k]:
        fail(f"machine.{k} missing")
levels = j["levels"]
expect = (["intra"] if ppn >= 2 else []) + (["inter"] if nodes >= 2 else [])
if sorted(levels) != sorted(expect):
    fail(f"levels {sorted(levels)}, expected {expect}")
for name in expect:
    lv = levels[name]
    num(lv["latency_ns"], f"{name}.latency_ns", positive=True)
    num(lv["ns_per_byte"], f"{name}.ns_per_byte", positive=True)
    flows = [c["flows"] for c in lv["concurrent"]]
    top = ppn  # intra: 1..ppn members each sending to the next; inter: 1..ppn members to node 1
    for k in ("pingpong_latency_ns", "busy_latency_ns"):
        num(lv[k], f"{name}.{k}", positive=True)
    if lv["latency_ns"] != max(lv["pingpong_latency_ns"], lv["busy_latency_ns"]):
        fail(f"{name}.latency_ns is not the larger of the ping-pong and the busy latency")
    if flows != list(range(1, top + 1)):
        fail(f"{name}.concurrent flows {flows}, expected 1..{top}")
    for c in lv["concurrent"]:
        num(c["ns_per_byte"], f"{name}.concurrent[{c['flows']}]", positive=True)
    if lv["concurrent"][0]["ns_per_byte"] != lv["ns_per_byte"]:
        fail(f"{name}: concurrent[flows=1] differs from ns_per_byte")
    # The ladder (hier-tune --ladder): one message per size alone and with every flow at once.
    lad = lv.get("ladder")
    if not want_ladder:
        if lad is not None:
            fail(f"{name}.ladder written without --ladder")
        continue
    if not isinstance(lad, dict):
        fail(f"{name}.ladder missing")
    if lad.get("flows") != top:
        fail(f"{name}.ladder.flows {lad.get('flows')!r}, expected {top}")
    pts = lad.get("points")
    if not isinstance(pts, list) or len(pts) < 3:
        fail(f"{name}.ladder.points: fewer than 3 sizes")
    sizes = [p.get("bytes") for p in pts]
    if sizes != sorted(set(sizes)) or sizes[0] != 4096:
        fail(f"{name}.ladder sizes {sizes}: not ascending from 4 KiB")
    for p in pts:
        num(p["ns"], f"{name}.ladder[{p['bytes']}].ns")
        num(p["ns_all"], f"{name}.ladder[{p['bytes']}].ns_all")
# Measured level steps (hier-tune 4): the MPI's collectives on each level's communicators, every
# one at once; members = the level's communicator size; ascending bytes, the bytes each call
# moved (a multiple of 4 x members for the allgather / reduce-scatter), at least two sizes.
for name in expect:
    st = levels[name].get("steps")
    if not want_steps:
        if st is not None:
            fail(f"{name}.steps written without --level-steps")
        continue
    if not isinstance(st, dict):
        fail(f"{name}.steps missing")
    members = ppn if name == "intra" else nodes
    if st.get("members") != members:
        fail(f"{name}.steps.members {st.get('members')!r}, expected {members}")
    for coll in ("allreduce", "allgather", "reduce_scatter_block", "bcast"):
        pts = st.get(coll)
        if not isinstance(pts, list) or len(pts) < 2:
            fail(f"{name}.steps.{coll}: fewer than 2 sizes")
        b = [p.get("bytes") for p in pts]
        if b != sorted(set(b)) or not all(isinstance(x, int) and x >= 16384 - 4 * members for x in b):
            fail(f"{name}.steps.{coll} bytes {b}: not ascending from about 16 KiB")
        for p in pts:
            num(p["ns"], f"{name}.steps.{coll}[{p['bytes']}].ns", positive=True)
            num(p["measured_ns"], f"{name}.steps.{coll}[{p['bytes']}].measured_ns", positive=True)
            # ns: the measured time less the level's busy latency, at least a fifth of it
            want = max(p["measured_ns"] - levels[name]["busy_latency_ns"], 0.2 * p["measured_ns"])
            if abs(p["ns"] - want) > 1e-6 * want + 1:
                fail(f"{name}.steps.{coll}[{p['bytes']}].ns {p['ns']}: not measured_ns less the busy latency ({want})")
            if coll in ("allgather", "reduce_scatter_block") and p["bytes"] % (4 * members):
                fail(f"{name}.steps.{coll}[{p['bytes']}]: not a multiple of 4 x {members}")
if expect:
    so = j.get("planner", {}).get("step_overhead_ns")
    num(so, "planner.step_overhead_ns", positive=True)
    if so != max(levels[n]["busy_latency_ns"] for n in expect):
        fail("planner.step_overhead_ns is not the largest busy latency")
for k in ("reduce_ns_per_byte", "copy_ns_per_byte"):
    num(j["compute"][k], f"compute.{k}", positive=True)
# The quantization kernels (HIER_QUANT), per format at HIER_QUANT_BLOCK (the test's environment
# leaves it at 512): present, and plausible for a host kernel (above 100 ns per byte, 10 MB/s,
# would be a unit or timing error), plus the one-figure keys older readers use (int8's).
def plausible(x, where):
    num(x, where, positive=True)
    if x >= 100:
        fail(f"{where} = {x!r}: not below 100 ns/byte")
q = j["compute"].get("quant")
if not isinstance(q, dict):
    fail("compute.quant missing")
if q.get("block") != int(os.environ.get("HIER_QUANT_BLOCK", "512")):
    fail(f"compute.quant.block {q.get('block')!r}, expected HIER_QUANT_BLOCK")
for fmt in ("int8", "int4"):
    for k in ("quantize_ns_per_byte", "dequantize_ns_per_byte", "dequantize_add_ns_per_byte"):
        plausible(q.get(fmt, {}).get(k), f"compute.quant.{fmt}.{k}")
for k, src in (("quantize_ns_per_byte", "quantize_ns_per_byte"), ("dequantize_ns_per_byte", "dequantize_add_ns_per_byte")):
    plausible(j["compute"].get(k), f"compute.{k}")
    if j["compute"][k] != q["int8"][src]:
        fail(f"compute.{k} is not compute.quant.int8.{src}")
# The four collectives at the same sizes: the MPI's own (flat_measured), and libhier's schedules
# (hier_measured, hier-tune --hier only).
for key in ("hier_measured", "hier_measured_nonblocking"):
    if not want_hier and key in j:
        fail(f"{key} written without --hier")
# Their nonblocking calls too (MPI_I* then MPI_Wait: flat_measured_nonblocking, and libhier's,
# hier_measured_nonblocking), at the same sizes.
keys = ("flat_measured", "flat_measured_nonblocking")
if want_hier:
    keys += ("hier_measured", "hier_measured_nonblocking")
for key in keys:
    if not isinstance(j.get(key), dict):
        fail(f"{key} missing")
    for coll in ("allreduce", "allgather", "reduce_scatter_block", "bcast"):
        pts = j[key].get(coll, [])
        if len(pts) < 2:
            fail(f"{key}.{coll}: {len(pts)} points")
        b = [p["bytes"] for p in pts]
        if b != sorted(set(b)) or b[0] != 65536:
            fail(f"{key}.{coll} bytes {b}: not ascending from 64 KiB")
        if key != "flat_measured" and b != [p["bytes"] for p in j["flat_measured"][coll]]:
            fail(f"{key}.{coll} sizes {b}: not flat_measured's")
        for p in pts:
            num(p["ns"], f"{key}.{coll}[{p['bytes']}]", positive=True)
# The node segment (HIER_SHM's "shm" section): measured on every node's members at once, where a
# node has two ranks or more; copy and reduce rates plausible for memory, a round above zero.
sh = j.get("shm")
if ppn >= 2:
    if not isinstance(sh, dict):
        fail("shm missing")
    if sh.get("members") != ppn:
        fail(f"shm.members {sh.get('members')!r}, expected {ppn}")
    for k in ("copy_ns_per_byte", "reduce_ns_per_byte"):
        plausible(sh.get(k), f"shm.{k}")
    num(sh.get("round_ns"), "shm.round_ns", positive=True)
elif sh is not None:
    fail("shm written with one rank per node")
d = j["dtype"]
if d.get("policy") not in ("auto", "always", "never"):
    fail(f"dtype.policy {d.get('policy')!r}")
for line in ("engine_pack", "engine_unpack", "mpi_pack", "mpi_unpack", "mpi_p2p", "contig_p2p"):
    for k in ("overhead_ns", "ns_per_byte", "ns_per_block"):
        num(d[line][k], f"dtype.{line}.{k}")
    if line != "contig_p2p" and d[line]["ns_per_byte"] + d[line]["ns_per_block"] <= 0:
        fail(f"dtype.{line}: no cost per byte or per block")
# The device rates (dtype.device): measured only where a GPU runtime and module are loaded.
dev = d.get("device")
if not want_device:
    if dev is not None:
        fail("dtype.device written without a GPU module")
else:
    if not isinstance(dev, dict):
        fail("dtype.device missing")
    for line in ("kernel_pack", "kernel_unpack", "copy", "mpi_pack"):
        for k in ("overhead_ns", "ns_per_byte", "ns_per_block"):
            num(dev[line][k], f"dtype.device.{line}.{k}")
        if dev[line]["overhead_ns"] + dev[line]["ns_per_byte"] + dev[line]["ns_per_block"] <= 0:
            fail(f"dtype.device.{line}: costs nothing")
# The GPU module's rates (the "device" section, tools/hier-tune/device.cpp): likewise.
gpu = j.get("device")
if not want_device:
    if gpu is not None:
        fail("device written without a GPU module")
else:
    if not isinstance(gpu, dict) or gpu.get("measured") is not True or not gpu.get("module"):
        fail(f"device section missing or not measured: {gpu!r}")
    num(gpu["step_ns"], "device.step_ns", positive=True)
    for k in ("copy_ns_per_byte", "h2d_ns_per_byte", "d2h_ns_per_byte", "reduce_ns_per_byte"):
        num(gpu[k], f"device.{k}")
    for fmt in ("int8", "int4"):
        for k in ("quantize_ns_per_byte", "dequantize_ns_per_byte", "dequantize_add_ns_per_byte"):
            num(gpu[fmt][k], f"device.{fmt}.{k}")
if "flat_algorithms" in j:
    fail("flat_algorithms written (built-in only)")
print(f"check_tune_file: {path} ok ({nodes} x {ppn}, {family}, levels {expect})")
