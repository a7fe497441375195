#!/usr/bin/env python3
"""Runs two commands (separated by ---) and requires the same output, at least one line: the
quantized collectives through shared-memory steps and through message steps (quant_bits.cpp).
usage: same_bits.py CHECK_REPORT REPORT_OFF REPORT_ON [CHECK_FLAG...] -- CMD_OFF... --- CMD_ON...
Then rank 0's reports: the first run ran no step through shared memory, the second ran the node
reduce-scatter and allgather(v) through it (check_report.py --no-shm / --shm), so that equal
outputs are not two runs of the same path; both pass check_report.py's CHECK_FLAGs too (e.g.
--pipelined allreduce: the runs compared were chunked). --off FLAG... / --on FLAG... (before --)
replace the two reports' own flags, for runs that differ otherwise (the device run against the
host run: --off --no-shm --on --device-path hier_device).
"""
import subprocess, sys

def main():
    check, rep_off, rep_on = sys.argv[1:4]
    extra = sys.argv[4:sys.argv.index("--")]
    own = {"--off": ["--no-shm"], "--on": ["--shm", "reduce_scatter", "allgatherv"]}
    for key in ("--on", "--off"):  # each takes the flags after it, up to the other or the end
        if key in extra:
            i = extra.index(key)
            j = next((k for k in range(i + 1, len(extra)) if extra[k] in own), len(extra))
            own[key], extra = extra[i + 1:j], extra[:i] + extra[j:]
    rest = sys.argv[sys.argv.index("--") + 1:]
    split = rest.index("---")
    runs = []
    for cmd in (rest[:split], rest[split + 1:]):
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=280)
        if p.returncode != 0:
            print(p.stdout, p.stderr)
            print(f"same_bits: {' '.join(cmd)} exited {p.returncode}")
            return 1
        runs.append([l for l in p.stdout.splitlines() if l.strip()])
    off, on = runs
    if not off:
        print("same_bits: no output")
        return 1
    bad = [f"  off: {a}\n  on:  {b}" for a, b in zip(off, on) if a != b]
    if bad or len(off) != len(on):
        print(f"same_bits: {len(bad)} of {len(off)} cases differ between the two runs")
        print("\n".join(bad))
        return 1
    print(f"same_bits: {len(off)} cases, the same bits in both runs")
    for rep, flag in ((rep_off, own["--off"]), (rep_on, own["--on"])):
        if subprocess.run([sys.executable, check, rep] + flag + extra).returncode != 0:
            return 1
    return 0

if __name__ == "__main__":
    sys.exit(main())
