#!/usr/bin/env python3
"""check_no_device.py REPORT [--runtime NAME] -- a run with a GPU runtime loaded and no device.

The finalize report must say that the runtime was found without a device (the device section's
runtime_without_device, naming NAME: hip or cuda), and that libhier took no device path: no call
counted as device or managed memory, nothing staged, no module loaded. Without --runtime the
report must show no runtime at all (a runtime library whose driver never came into the process,
as CUDA's libcudart before its first call).
"""
import json
import sys


def main():
    args = sys.argv[1:]
    path = args.pop(0)
    want = None
    if args[:1] == ["--runtime"]:
        want = args[1]
    with open(path) as f:
        rep = json.load(f)
    dev = rep.get("device")
    errors = []
    if want:
        if not dev:
            errors.append("no device section: the runtime without a device went unnoticed")
        else:
            why = dev.get("runtime_without_device", "")
            if not why.startswith(want + " "):
                errors.append(f"runtime_without_device is {why!r}, expected the {want} runtime named")
    if dev:
        if dev.get("runtime") != "none":
            errors.append(f"runtime {dev.get('runtime')!r}: libhier counts a runtime without a device as present")
        for section in ("device", "managed"):
            n = dev.get(section, {}).get("calls", 0)
            if n:
                errors.append(f"{n} call(s) took a {section} path: {dev[section].get('by_call')}")
        staged = dev.get("staged_bytes", {})
        if any(v for side in staged.values() for v in side.values()):
            errors.append(f"bytes staged through the runtime: {staged}")
    calls = sum(v.get("calls", 0) for v in rep.get("functions", {}).values() if isinstance(v, dict))
    if calls == 0:
        errors.append("the report counts no call: the run did not go through libhier")
    for e in errors:
        print("check_no_device:", e)
    if not errors:
        print(f"check_no_device: ok ({calls} calls, {'runtime ' + want + ' without a device' if want else 'no runtime'})")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
