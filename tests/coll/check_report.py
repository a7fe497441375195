#!/usr/bin/env python3
"""Checks the finalize report of a collective test run (rank 0's file).

usage: check_report.py REPORT [--hier FN ...] [--flat FN ...] [--shm KIND ...] [--no-shm] [--algo FN ALGO ...] [--no-algo FN ALGO ...] [--max-live N]
  --hier FN: MPI function FN ran hierarchically at least once
  --flat FN: MPI function FN never ran hierarchically
  --max-live N: at most N libhier contexts were alive at finalize (level communicators freed)
  --pipelined COLL: collective COLL (allreduce, bcast) ran chunk-pipelined at least once
  --algo FN ALGO: MPI function FN ran at least once with algorithm ALGO (flat, hier, hier_int8,
                 hier_int4, packed: diag::kAlgoNames)
  --no-algo FN ALGO: MPI function FN never ran with algorithm ALGO
  --shm KIND: at least one level step of KIND (reduce_scatter, allgather, bcast, ...) ran through
             shared memory (HIER_SHM); --no-shm: none did
  --single KIND: at least one of them ran single copy (process_vm_readv), unless the report
             says the kernel refused it between the ranks (single_copy_refused: such a machine)
  --fallback POINT[=N]: calls fell back to the MPI because some rank failed to acquire POINT
                        (levels, plan, scratch): at least once, or exactly N times
  --device-path PATH: device buffers took path PATH (the report's device section: hier_device,
             hier_staged, staged, gpu_aware) at least once, and none was passed as is to an MPI
             that is not GPU-aware
"""
import json
import sys


def main():
    args = sys.argv[1:]
    path = args.pop(0)
    with open(path) as f:
        rep = json.load(f)
    fns = rep.get("functions", {})
    topo = rep.get("topology", {})
    errors = []
    mode = None
    algo_fn = None
    for a in args:
        if a == "--no-shm":
            steps = rep.get("shm", {}).get("steps", {})
            if steps:
                errors.append(f"steps through shared memory: {steps}, expected none")
            mode = None
            continue
        if a in ("--hier", "--flat", "--max-live", "--pipelined", "--fallback", "--algo", "--no-algo", "--shm", "--single",
                 "--device-path"):
            mode = a
            algo_fn = None
            continue
        if mode in ("--algo", "--no-algo"):
            if algo_fn is None:
                algo_fn = a
                continue
            calls = fns.get(algo_fn, {}).get("algorithms", {}).get(a, {}).get("calls", 0)
            if mode == "--algo" and calls == 0:
                errors.append(f"{algo_fn}: no call with algorithm {a} (algorithms: {fns.get(algo_fn, {}).get('algorithms')})")
            if mode == "--no-algo" and calls:
                errors.append(f"{algo_fn}: {calls} calls with algorithm {a}, expected none")
            algo_fn = None
            continue
        if mode == "--device-path":
            by_path = rep.get("device", {}).get("device", {}).get("by_path", {})
            if not by_path.get(a) or by_path.get("passed"):
                errors.append(f"device buffers: path {a} not taken, or some passed as is (by_path: {by_path})")
            continue
        if mode == "--hier":
            calls = fns.get(a, {}).get("algorithms", {}).get("hier", {}).get("calls", 0)
            if calls == 0:
                errors.append(f"{a}: no hierarchical call (algorithms: {fns.get(a, {}).get('algorithms')})")
        elif mode == "--flat":
            calls = fns.get(a, {}).get("algorithms", {}).get("hier", {}).get("calls", 0)
            if calls:
                errors.append(f"{a}: {calls} hierarchical calls, expected none")
        elif mode == "--shm":
            if rep.get("shm", {}).get("steps", {}).get(a, 0) == 0:
                errors.append(f"{a}: no step through shared memory (shm: {rep.get('shm')})")
        elif mode == "--single":
            sh = rep.get("shm", {})
            if sh.get("single_copy", {}).get(a, 0) == 0:
                if sh.get("single_copy_refused", 0):
                    print(f"note: {a}: no single copy: the kernel refused it here (shm: {sh})")
                else:
                    errors.append(f"{a}: no step ran single copy (shm: {sh})")
        elif mode == "--pipelined":
            pipe = rep.get("pipeline", {}).get(a, {})
            if pipe.get("calls", 0) == 0 or pipe.get("chunks", 0) < 2 * pipe.get("calls", 0):
                errors.append(f"{a}: no pipelined call (pipeline: {rep.get('pipeline')})")
        elif mode == "--fallback":
            point, _, n = a.partition("=")
            calls = rep.get("fallbacks", {}).get(point, {}).get("calls", 0)
            if (n and calls != int(n)) or (not n and calls == 0):
                errors.append(f"{point}: {calls} fallbacks, expected {n or 'some'} (fallbacks: {rep.get('fallbacks')})")
        elif mode == "--max-live":
            live = topo.get("live", {}).get("contexts")
            if live is None or live > int(a):
                errors.append(f"live contexts at finalize: {live}, expected at most {a} (topology: {topo})")
    for e in errors:
        print("check_report:", e)
    print("check_report:", "FAILED" if errors else "ok", path, json.dumps(topo))
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
