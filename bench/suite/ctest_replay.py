#!/usr/bin/env python3
"""Replays ctest's scheduling of one test run with other -j / PROCESSORS settings, from the
durations a log measured (bench/RESULTS.md, "Session 18 (citime2)").

  ctest --preset mpich --show-only=json-v1 > tests.json   # the tests and their properties
  bench/suite/ctest_replay.py tests.json CTEST_LOG [--jobs N] [--cap C]

CTEST_LOG: the output of a ctest run ("Test #N: name ... Passed 0.45 sec" lines; a tools/test.sh
log is read from the stage named by --stage). Each test keeps its measured duration; the replay
starts tests as ctest does without cost data (in order, as soon as their dependencies and
fixtures are done, their PROCESSORS fit in the free slots, no RESOURCE_LOCK is held, and
RUN_SERIAL tests alone), PROCESSORS capped at --cap (default: as in tests.json) and at --jobs.
It assumes a test takes as long beside another as it did in the log: true for the tests that
wait (hang watchdogs), optimistic for two that both keep the cores busy.
"""
import argparse
import heapq
import json
import re


def durations(log, stage):
    cur, out = None, {}
    for line in open(log):
        m = re.match(r"== (\w+): (\w+)", line)
        if m:
            cur = m.group(1)
            continue
        m = re.search(r"Test +#\d+: (\S+) \.+.*?([\d.]+) sec", line)
        if m and (stage is None or cur == stage):
            out[m.group(1)] = float(m.group(2))
    return out


def replay(tests, dur, jobs, cap):
    setup = {}
    for t in tests:
        for f in t["p"].get("FIXTURES_SETUP", []):
            setup.setdefault(f, set()).add(t["name"])
    pending = [t for t in tests if t["name"] in dur]
    names = {t["name"] for t in pending}

    def deps(t):
        d = set(t["p"].get("DEPENDS", []))
        for f in t["p"].get("FIXTURES_REQUIRED", []):
            d |= setup.get(f, set())
        return d & names

    def procs(t):
        p = t["p"].get("PROCESSORS", 1)
        return min(p, cap or p, jobs)

    done, running, now, used, locks, serial = set(), [], 0.0, 0, set(), False
    while pending or running:
        started = True
        while started and not serial:
            started = False
            for t in pending:
                lk = set(t["p"].get("RESOURCE_LOCK", []))
                rs = bool(t["p"].get("RUN_SERIAL", False))
                if not deps(t) <= done or (rs and running) or used + procs(t) > jobs or lk & locks:
                    continue
                pending.remove(t)
                used, locks, serial = used + procs(t), locks | lk, rs
                heapq.heappush(running, (now + dur[t["name"]], t["name"], procs(t), tuple(lk), rs))
                started = True
                break
        end, name, p, lk, rs = heapq.heappop(running)
        now, used, locks = end, used - p, locks - set(lk)
        done.add(name)
        serial = serial and not rs
    return now


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("tests_json")
    ap.add_argument("log")
    ap.add_argument("--stage", help="the tools/test.sh stage of the log (openmpi, mpich, tsan, asan)")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--cap", type=int, default=0, help="the most PROCESSORS a test claims (0: as given)")
    a = ap.parse_args()
    tests = [{"name": t["name"], "p": {x["name"]: x["value"] for x in t.get("properties", [])}}
             for t in json.load(open(a.tests_json))["tests"]]
    dur = durations(a.log, a.stage)
    ran = [t for t in tests if t["name"] in dur]
    print(f"{len(ran)} tests, {sum(dur[t['name']] for t in ran):.0f} s in all; "
          f"-j{a.jobs}, PROCESSORS capped at {a.cap or 'their value'}: {replay(tests, dur, a.jobs, a.cap):.0f} s")


if __name__ == "__main__":
    main()
