#!/usr/bin/env python3
"""A job killed before its segment agreement leaves no segment name behind once another job
creates a segment (shm::sweep_dead_names, docs/shm.md "Safety").
usage: shm_leak.py -- CMD_DIE... --- CMD_OPEN...
CMD_DIE (shm_leak die) must fail and leave at least one name of this user whose creator is dead
(else this test could not fail: the kill came too late); CMD_OPEN (shm_leak open) must succeed,
and afterwards none of those names may be left."""
import os, subprocess, sys, time

SHM = "/dev/shm"

def names():
    """libhier.<uid>.<pidns>.<pid>.* of this user: {name: pid}."""
    out = {}
    for n in os.listdir(SHM):
        f = n.split(".")
        if len(f) >= 6 and f[0] == "libhier" and f[1] == str(os.getuid()) and f[3].isdigit():
            out[n] = int(f[3])
    return out

def alive(pid):
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True

def main():
    rest = sys.argv[sys.argv.index("--") + 1:]
    split = rest.index("---")
    die, opener = rest[:split], rest[split + 1:]
    before = names()
    p = subprocess.run(die, capture_output=True, text=True, timeout=120)
    if p.returncode == 0:
        print(p.stdout, p.stderr)
        print("shm_leak: the killed job exited 0")
        return 1
    # The job's names: new since, their creators gone (mpiexec may return while one still exits).
    left = {n: pid for n, pid in names().items() if n not in before}
    for _ in range(100):
        if not any(alive(pid) for pid in left.values()):
            break
        time.sleep(0.1)
    left = {n for n, pid in left.items() if not alive(pid)}
    if not left:
        print("shm_leak: the killed job left no name behind: the kill did not hit the window")
        return 1
    print(f"shm_leak: the killed job left {sorted(left)}")
    p = subprocess.run(opener, capture_output=True, text=True, timeout=120)
    if p.returncode != 0 or "segment opened" not in p.stdout:
        print(p.stdout, p.stderr)
        print(f"shm_leak: {' '.join(opener)} exited {p.returncode}")
        return 1
    still = sorted(n for n in left if os.path.exists(os.path.join(SHM, n)))
    if still:
        print(f"shm_leak: still in {SHM} after the next job: {still}")
        return 1
    print("shm_leak: the next job's creator removed them")
    return 0

if __name__ == "__main__":
    sys.exit(main())
