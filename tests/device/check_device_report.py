#!/usr/bin/env python3
"""Checks the finalize report's "device" section of a device_buffers run (rank 0)."""
import json
import sys

path, mode = sys.argv[1], sys.argv[2]
with open(path) as f:
    rep = json.load(f)
dev = rep.get("device")
if dev is None:
    sys.exit(f"{path}: no 'device' section")
by_call = dev["device"]["by_call"]
p2p = ["send", "recv", "isend", "irecv", "sendrecv", "pack", "unpack"]
colls = ["allreduce", "reduce", "bcast", "allgather", "allgatherv", "reduce_scatter_block", "reduce_scatter",
         "alltoall"]
# Preloaded: collectives pass through (one count per call family); late: they are staged.
want = p2p + (colls if mode == "preloaded" else ["staged"])
missing = [k for k in want if by_call.get(k, 0) < 1]
if dev["runtime"] != "cuda" or missing:
    sys.exit(f"{path}: runtime {dev['runtime']}, missing counts for {missing}: {json.dumps(dev)}")
if mode == "late" and by_call["staged"] < len(colls):
    sys.exit(f"{path}: only {by_call['staged']} staged collectives: {json.dumps(dev)}")
print(f"{path}: {dev['device']['calls']} device calls: {by_call}")
