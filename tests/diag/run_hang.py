#!/usr/bin/env python3
"""Runs tests/diag/hang.c under mpiexec with libhier preloaded and HIER_WATCHDOG=2, injects one
fault, and checks the hang report: it appears within the limit + 5 s of the fault, exactly once
(stderr and one JSON file in HIER_REPORT's directory), names the communicator, the collective,
the waiting ranks with their call sites (file:line of hang.c) and the missing rank with what it
does. The job then ends as it would without libhier (a clean exit where the program recovers;
killed by this script where it would hang forever).

usage: run_hang.py --mpi openmpi|mpich --mpiexec PATH --lib libhier.so --exe hang --src hang.c MODE
MODE: none sleep stop kill mismatch skip split cslow hostile symlink isleep isleep_thread itest istop imismatch ipersist
  Each checks C4's class in the report (docs/diagnostics.md "The four classes"): mismatch,
    imismatch: communication hang; kill: non-communication hang; the sleep and stop cases:
    non-communication hang, then, when the late rank arrives, the ENDED line and the file's class
    non-communication slow;
  cslow: every rank in an MPI_Allreduce whose reduction operator takes LIMIT + 2 s once: no missing
    rank, communication hang at the report, communication slow when it ends;
  isleep, itest: the sleep case with MPI_Iallreduce + MPI_Wait (a loop of MPI_Test): the report
    names the collective, the waiting ranks at their MPI_Wait / MPI_Test line, the sleeping rank;
  isleep_thread: isleep with HIER_PROGRESS=thread (MPI_THREAD_MULTIPLE);
  istop, imismatch: the stop and mismatch cases with MPI_Iallreduce (rank 1 MPI_Ibcast) + MPI_Wait;
  skip: a mismatched call order, rank 1 skips one allreduce: the flight recorder (HIER_FLIGHT)
    gives every rank's recent calls and names the skipped call (its line) and rank 1;
  ipersist: the sleep case with a persistent MPI_Allreduce_init + MPI_Start + MPI_Wait (MPI-4).
  hostile: before the sleep case, while every rank waits outside MPI, hostile clients talk to each
    rank's side channel (hostile.py): none may get a byte back beyond the challenge, no socket may
    listen on 0.0.0.0 or on another address than loopback (every rank is on this host); the
    watchdog's own queries are captured during the sleep case and, once its report is out,
    replayed: they get nothing; the sleep case must be reported as usual.
  symlink: the sleep case with symlinks planted at rank 0's report, its hang file and its debug
    log, a file of another user's (uid 65534, as root) at rank 1's debug log and a FIFO at rank
    2's: their targets and the planted file must stay untouched, the report and hang file be
    regular files of valid JSON, each refused debug log one warning line saying why.
"""
import argparse
import glob
import json
import os
import re
import signal
import subprocess
import tempfile
import threading
import time

from common import fail, site_line
from hostile import Sniffer, attack_side_channels, replay

LIMIT = 2.0
NP = 4
# The modes tests/cluster/hang.sh runs (the others need launcher options: kill's recovery; or add
# nothing there: hostile, symlink, itest, ipersist, cslow test the same code as their neighbours).
CLUSTER_MODES = ("none", "sleep", "stop", "split", "isleep", "isleep_thread", "istop", "imismatch")


def strip_genv(cmd, name):
    """cmd without `-genv NAME VALUE` / `-x NAME=VALUE`."""
    out, i = [], 0
    while i < len(cmd):
        if cmd[i] == "-genv" and i + 1 < len(cmd) and cmd[i + 1] == name:
            i += 3
            continue
        if cmd[i] == "-x" and i + 1 < len(cmd) and cmd[i + 1].startswith(name + "="):
            i += 2
            continue
        out.append(cmd[i])
        i += 1
    return out


def check_hier_report(tmp, j):
    """tools/hier-report on the run's directory names the hang's class, and counts it."""
    tool = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools", "hier-report")
    h = subprocess.run(["/usr/bin/python3", tool, tmp], capture_output=True, text=True, timeout=60)
    print(h.stdout)
    text = lambda c: c.replace("_", " ").replace("non ", "non-")
    want = f"    class: {text(j['class'])}"
    if j.get("reported_class"):
        want += f" (reported as a {text(j['reported_class'])}, completed after {j['completed_after_s']:.2f} s)"
    lines = h.stdout.splitlines()
    if h.returncode != 0 or not any(l.startswith(want + ": ") for l in lines):
        fail(f"hier-report (rc {h.returncode}) does not give the hang's class: {want!r}")
    # (The finalize reports can add stragglers: 4 ranks on fewer cores give real arrival skew.)
    classes = [l for l in lines if l.startswith("C4 classes: ")]
    if len(classes) != 1 or not re.search(rf"[:;] {text(j['class'])} \d+ \(1 hang report[,)]", classes[0]):
        fail(f"hier-report's C4 classes line does not count the hang: {classes}")


def check_cluster_listeners(cluster, lines, lock):
    """On the emulated cluster (hang.sh gives every node a second interface, side0, that the job
    does not use): each rank's side channel listens on its node's cluster address only. Its
    sockets are found in the nodes' /proc/net/tcp, told from the MPI's by the ports each rank logs
    at HIER_DEBUG=INFO."""
    from hostile import listeners_in
    mc = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools", "minicluster")
    st = json.loads(subprocess.run(["/usr/bin/python3", mc, "--name", cluster, "status", "--json"],
                                   capture_output=True, text=True, check=True).stdout)
    with lock:
        adv = [x for _, _, l in lines for m in [re.search(r"libhier\[\d+\].*side channel on (.*)$", l)] if m
               for x in m.group(1).split()]
    ports = {int(x.split(":")[1]) for x in adv}
    if len(adv) < NP:
        fail(f"cluster: {len(adv)} side channel addresses logged for {NP} ranks: {adv}")
    found, seconds = 0, 0
    for n in st["node_list"]:
        ip4 = subprocess.run(["ip", "-n", n["ns"], "-4", "-o", "addr", "show"], capture_output=True, text=True).stdout
        seconds += " side0 " in ip4
        tcp = subprocess.run(["ip", "netns", "exec", n["ns"], "cat", "/proc/net/tcp"], capture_output=True, text=True).stdout
        for ip, port in listeners_in(tcp):
            if port not in ports:
                continue  # the MPI's own
            found += 1
            print(f"cluster: {n['hostname']} ({n['addr']}): libhier listens on {ip}:{port}")
            if ip != n["addr"]:
                fail(f"cluster: libhier listens on {ip}:{port} on {n['hostname']}, not on the job's network ({n['addr']})")
    if seconds < len(st["node_list"]):
        fail("cluster: not every node has the second interface side0 (tests/cluster/hang.sh adds it)")
    if found < NP:
        fail(f"cluster: {found} libhier listening sockets found for {NP} ranks")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mpi", required=True)
    ap.add_argument("--mpiexec", required=True)
    ap.add_argument("--lib", required=True)
    ap.add_argument("--test-preload", default="", help="preloaded after LIB (cmake/HierTesting.cmake's "
                    "HIER_TEST_PRELOAD: the waiting ranks then leave their core to the tests beside)")
    ap.add_argument("--exe", required=True)
    ap.add_argument("--src", required=True)
    ap.add_argument("--launcher", default="", help="extra launcher arguments (cluster runs)")
    ap.add_argument("--cluster", default="", help="run on this emulated cluster (tools/minicluster, "
                    "already up; tests/cluster/hang.sh): the ranks on separate nodes, the watchdog's side "
                    "channel across the links")
    ap.add_argument("mode")
    a = ap.parse_args()
    if a.cluster and a.mode not in CLUSTER_MODES:
        fail(f"mode {a.mode} is not run on the cluster (it needs launcher options)")

    tmp = tempfile.mkdtemp(prefix=f"hier-hang-{a.mode}-")
    preload = f"{a.lib}:{a.test_preload}" if a.test_preload else a.lib
    env_vars = {"LD_PRELOAD": preload, "HIER_WATCHDOG": str(int(LIMIT)), "HIER_REPORT": f"{tmp}/r%r.json"}
    if a.mode == "isleep_thread":  # (hang.c asks for MPI_THREAD_MULTIPLE in this mode)
        env_vars["HIER_PROGRESS"] = "thread"
    if a.mode == "hostile" or (a.cluster and a.mode == "sleep"):
        env_vars["HIER_DEBUG"] = "INFO"  # each rank logs its side channel's addresses
    planted = {}  # symlink -> its target, which must stay untouched
    if a.mode == "symlink":
        env_vars["HIER_DEBUG_FILE"] = f"{tmp}/debug%r.log"
        for name in ("r0.json", "hier-hang-0-4.json", "debug0.log"):
            target = f"{tmp}/precious-{name}"
            with open(target, "w") as f:
                f.write("precious\n")
            os.symlink(target, f"{tmp}/{name}")
            planted[f"{tmp}/{name}"] = target
        if os.geteuid() == 0:  # a file another user planted in a shared directory
            with open(f"{tmp}/debug1.log", "w") as f:
                f.write("precious\n")
            os.chown(f"{tmp}/debug1.log", 65534, 65534)
            planted[f"{tmp}/debug1.log"] = f"{tmp}/debug1.log"
        os.mkfifo(f"{tmp}/debug2.log")  # opened for writing, it would block without a reader
    cmd = [a.mpiexec]
    if a.mpi == "openmpi":
        cmd += ["--allow-run-as-root", "--oversubscribe", "--bind-to", "none",
                "--mca", "btl_vader_single_copy_mechanism", "none"]
        for k, v in env_vars.items():
            cmd += ["-x", f"{k}={v}"]
        if a.mode == "kill":
            cmd += ["--enable-recovery"]  # keep the job alive: the others wait on the dead rank
    else:
        for k, v in env_vars.items():
            cmd += ["-genv", k, v]
        if a.mode == "kill":
            cmd += ["-disable-auto-cleanup"]
    cmd += a.launcher.split()
    # A sleeping fault lasts until this script creates `wake`, once the report is out (hang.c);
    # sleep_s only bounds it, where no report comes (the checks then fail on the missing report).
    sleep_s = str(int(LIMIT) + 8)
    go, wake = f"{tmp}/go", f"{tmp}/wake"
    cmd += ["-n", str(NP), a.exe, a.mode, sleep_s, go, wake]
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)
    if a.cluster:  # minicluster passes the caller's HIER_* variables to the ranks, LD_PRELOAD by --preload
        mc = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools", "minicluster")
        cmd = ["/usr/bin/python3", mc, "--name", a.cluster, "run", "--mpi", a.mpi, "--np", str(NP),
               "--timeout", "80", "--preload", preload]
        if a.mpi == "mpich":  # UCX would also try the nodes' second interface (side0, hang.sh): unreachable
            cmd += ["-X", "-genv UCX_NET_DEVICES eth0"]
        cmd += ["--", a.exe, a.mode, sleep_s, go, wake]
        env.update({k: v for k, v in env_vars.items() if k != "LD_PRELOAD"})
    env.update({"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"})

    t_start = time.monotonic()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                         start_new_session=True)
    lines = []  # (time, stream, text)
    lock = threading.Lock()

    def reader(stream, name):
        for line in stream:
            with lock:
                lines.append((time.monotonic(), name, line.rstrip("\n")))

    ts = [threading.Thread(target=reader, args=(p.stdout, "out"), daemon=True),
          threading.Thread(target=reader, args=(p.stderr, "err"), daemon=True)]
    for t in ts:
        t.start()

    def find(pred):
        with lock:
            for t, s, l in lines:
                if pred(l):
                    return t, l
        return None, None

    hang_files = lambda: sorted(f for f in glob.glob(f"{tmp}/hier-hang-*.json") if not os.path.islink(f))
    attacked = None  # the hostile clients' findings, and their connections held open to the end
    t_fault = victim_pid = t_report = t_file = t_woken = None
    continued = False
    finalize_hang = False
    deadline = t_start + 60
    expect_hang = a.mode != "none"
    while time.monotonic() < deadline and p.poll() is None:
        time.sleep(0.05)
        if a.mode == "hostile" and attacked is None:
            with lock:
                ready = [l for _, s, l in lines if l.startswith("READY ")]
            if len(ready) == NP:
                with lock:
                    adv = {}
                    for _, _, l in lines:
                        m = re.search(r"libhier\[(\d+)\].*side channel on (.*)$", l)
                        if m:
                            adv[int(m.group(1))] = [(x.split(":")[0], int(x.split(":")[1])) for x in m.group(2).split()]
                pids = {int(l.split()[2]): int(l.split()[4]) for l in ready}
                attacked = attack_side_channels([pids[r] for r in range(NP)], adv)
                sniffer = Sniffer([port for r in adv.values() for _, port in r])  # the watchdog's queries from here on
                open(go, "w").close()
        if t_fault is None:
            t_fault, l = find(lambda l: l.startswith("FAULT "))
            if l:
                victim_pid = int(l.split()[4])
        if t_report is None and hang_files():
            t_report, _ = find(lambda l: "HANG:" in l)
            t_report = t_report or time.monotonic()
            t_file = time.monotonic()
        if t_report and not t_woken and time.monotonic() > t_file + 0.5:  # the report complete
            if a.cluster and a.mode == "sleep":  # every rank still alive: its sockets now
                check_cluster_listeners(a.cluster, lines, lock)
            if a.mode == "hostile" and attacked is not None:  # every rank still alive: replay now
                sniffer.stop()
                replay(sniffer, attacked.problems, attacked.log)
            open(wake, "w").close()  # a sleeping fault ends here (hang.c's DOZE)
            t_woken = time.monotonic()
        if a.mode in ("stop", "istop") and victim_pid and not continued and (t_report or time.monotonic() > t_fault + LIMIT + 10):
            time.sleep(0.5)  # let the report be complete
            os.kill(victim_pid, signal.SIGCONT)
            continued = True
        if a.mode in ("kill", "mismatch", "imismatch") and t_report and time.monotonic() > t_report + 1.0:
            break  # without libhier this job would hang: end it as a user would
        if a.cluster and a.mpi == "mpich":
            # MPICH 4.0.2 over UCX's TCP transport can hang in MPI_Finalize after the work is
            # done, without libhier too (docs/minicluster.md): DONE (rank 0's, and the fault over:
            # in the split case rank 0 is done before the sleeper wakes) and 3 s more count as the
            # end (libhier's reports are written before the MPI's own finalize).
            t_done, _ = find(lambda l: l.startswith("DONE "))
            fault_over = t_woken or (t_fault or 0) + float(sleep_s)
            if t_done and time.monotonic() > max(t_done, fault_over) + 3:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
                finalize_hang = True
                break
    if p.poll() is None:
        if a.mode not in ("kill", "mismatch", "imismatch") or not t_report:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
            for t in ts:
                t.join(2)
            print("\n".join(f"[{s}] {l}" for _, s, l in lines))
            fail(f"mode {a.mode}: the job did not end (t_fault={t_fault}, t_report={t_report})")
        os.killpg(p.pid, signal.SIGTERM)
        try:
            p.wait(10)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
    rc = 0 if finalize_hang else p.wait()
    for t in ts:
        t.join(5)
    out = "\n".join(f"[{s}] {l}" for _, s, l in lines)
    print(out)
    if a.mode == "hostile":
        if attacked is None:
            fail("the ranks never got ready for the hostile clients")
        print(attacked.summary())
        attacked.close()
        if attacked.problems:
            fail("; ".join(attacked.problems))
    for link, target in planted.items():
        with open(target) as f:
            if f.read() != "precious\n":
                fail(f"the symlink {link} was followed: {target} changed")
    if a.mode == "symlink":
        refusals = {"debug0.log": r"a symbolic link", "debug2.log": r"not a regular file \(a FIFO\)"}
        if os.geteuid() == 0:
            refusals["debug1.log"] = r"owned by uid 65534, not by this user \(uid 0\)"
        for name, why in refusals.items():
            n = len(re.findall(rf"libhier: WARN: HIER_DEBUG_FILE: cannot open '[^']*/{re.escape(name)}' \({why}\): "
                               r"only a new file or a regular file of this user's; logging to stderr", out))
            if n != 1:
                fail(f"{n} warning lines (expected one) for the planted HIER_DEBUG_FILE {name} ({why})")
        for name in ("r0.json", "hier-hang-0-4.json"):
            path = f"{tmp}/{name}"
            if os.path.islink(path) or not os.path.isfile(path):
                fail(f"{path} is not a regular file written by libhier")
            with open(path) as f:
                json.load(f)
            if os.stat(path).st_mode & 0o777 != 0o600:
                fail(f"{path} has mode {oct(os.stat(path).st_mode & 0o777)}, expected 0600")
    hang_lines = [l for _, s, l in lines if "HANG:" in l]
    # The watchdog's log lines: "libhier[0] WARN watchdog[ file:line]: MESSAGE".
    class_lines = [l.split(":   class: ", 1)[1] for _, s, l in lines if "WARN watchdog" in l and ":   class: " in l]
    ended_lines = [l.split(": ENDED: ", 1)[1] for _, s, l in lines if "WARN watchdog" in l and ": ENDED: " in l]
    files = hang_files()

    if not expect_hang:
        if hang_lines or files:
            fail(f"a run with no fault printed a hang report: {hang_lines} {files}")
        if rc != 0 or "DONE" not in out:
            fail(f"clean run failed: rc={rc}")
        print("PASS: no fault, no report")
        return

    # MPICH's hydra may end the job while the watchdog is printing (its first line out, the
    # report file not yet): the same outcome as ending it before, the launcher's, not libhier's.
    killed_midway = a.mpi == "mpich" and not class_lines and "EXIT STRING: Killed (signal 9)" in out
    if a.mode == "kill" and (not hang_lines or killed_midway) and not files and t_fault and rc != 0:
        # The launcher ended the job at the death (MPICH's hydra does, even with
        # -disable-auto-cleanup): no hang to report. It must end the same way without libhier.
        # Without libhier, MPICH's hydra does not always end it: the survivors can wait in the
        # allreduce for good (seen in CI). A job that does not end within 30 s did not exit 0
        # either: libhier's run ended, so libhier made nothing worse.
        base = strip_genv(cmd, "LD_PRELOAD")
        b = subprocess.Popen(base, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env,
                             start_new_session=True)
        try:
            brc = b.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(b.pid, signal.SIGKILL)
            b.wait()
            print(f"PASS: kill (the launcher ended the job at the death with libhier, rc {rc}; "
                  "without libhier it hung 30 s and was killed)")
            return
        if brc == 0:
            fail(f"without libhier the killed job exits 0, with it rc={rc}")
        print(f"PASS: kill (the launcher ends the job at the death, with and without libhier: rc {rc} / {brc})")
        return
    if len(hang_lines) != 1 or len(files) != 1 or len(class_lines) != 1:
        fail(f"expected exactly one hang report with its class, got {len(hang_lines)} lines, {class_lines}, files {files}")
    if t_fault is None:
        fail("no FAULT marker")
    delay = t_report - t_fault
    print(f"report {delay:.2f} s after the fault (limit {LIMIT} s)")
    if delay > LIMIT + 5:
        fail(f"report came {delay:.1f} s after the fault, more than limit + 5 s")
    with open(files[0]) as f:
        j = json.load(f)
    print(json.dumps(j, indent=1))
    check_hier_report(tmp, j)
    victim = 1 if a.mode != "split" else NP - 1
    waiting = {w["rank"]: w for w in j["waiting"]}
    missing = {m["rank"]: m for m in j["missing"]}

    def expect(cond, what):
        if not cond:
            fail(what)

    def expect_class(at_report, basis, final):
        """C4's class: the report's line, the file's class now, and the ENDED line where it changed."""
        expect(class_lines[0] == f"{at_report.replace('_', ' ').replace('non ', 'non-')}: {basis}",
               f"class at the report: {class_lines[0]!r}, expected {at_report} ({basis})")
        expect(j["class"] == final, f"the report's class is {j['class']}, expected {final}")
        if final == at_report:
            expect(not ended_lines and "reported_class" not in j, f"the call did not end: {ended_lines}")
            return
        expect(j.get("reported_class") == at_report and j["completed_after_s"] >= j["waited_s"],
               f"the report rewritten when the call ended: {j.get('reported_class')} {j.get('completed_after_s')}")
        expect(len(ended_lines) == 1 and f"is now classed {final.replace('_', ' ').replace('non ', 'non-')}: "
               in ended_lines[0], f"one ENDED line naming {final}: {ended_lines}")

    if a.mode in ("mismatch", "imismatch"):
        i = a.mode == "imismatch"
        ar, bc = ("MPI_Iallreduce", "MPI_Ibcast") if i else ("MPI_Allreduce", "MPI_Bcast")
        expect(j["collective"] in (ar, bc), "collective named")
        mm = {c["call"].split("(")[0]: c["ranks"] for c in j.get("mismatch", [])}
        # A rank past the call is named by the blocking form its signature records.
        bcast = mm.get(bc, mm.get("MPI_Bcast"))
        expect(bcast == [1], f"mismatch names rank 1's {bc}: {mm}")
        expect(mm.get(ar) == [0, 2, 3], f"mismatch names ranks 0,2,3's {ar}: {mm}")
        sites = {r: w["call_site"] for r, w in waiting.items()}
        # Nonblocking: in the MPI_I... call itself, or in the MPI_Wait after it.
        for r in (0, 2, 3):
            if r in waiting:
                want = tuple(site_line(a.src, m) for m in (("iallreduce_mm", "iwait_mm") if i else ("allreduce_mm",)))
                expect(sites[r].startswith(want), f"rank {r} call site {sites[r]}, expected one of {want}")
        if 1 in waiting:
            want = tuple(site_line(a.src, m) for m in (("ibcast_mm", "iwait_mm") if i else ("bcast",)))
            expect(waiting[1]["call_site"].startswith(want), f"rank 1 call site {waiting[1]}")
        expect_class("communication_hang", "the members called different collectives at this sequence number",
                     "communication_hang")
        # The job would hang without libhier; this script ended it.
        print("PASS: mismatch reported")
        return

    if a.mode == "skip":
        # World collectives #1-3 (no fault), #4, #5 the skipped call (rank 1: its third), #6.
        skipped, third = site_line(a.src, "skip_skipped"), site_line(a.src, "skip_third")
        expect(j["collective"] == "MPI_Allreduce" and j["sequence"] == 6, f"the hang: {j['collective']} #{j['sequence']}")
        expect(list(missing) == [1] and sorted(waiting) == [0, 2, 3], f"missing {list(missing)}, waiting {sorted(waiting)}")
        recent = {e["rank"]: e["calls"] for e in j.get("recent_calls", [])}
        expect(sorted(recent) == list(range(NP)), f"recent calls of ranks {sorted(recent)}, expected every rank")
        for r, calls in recent.items():
            world = [c for c in calls if c["communicator"] == j["communicator"]["key"]]
            want_n = 5 if r == 1 else 6
            expect([c["sequence"] for c in world] == list(range(1, want_n + 1)),
                   f"rank {r}'s recent calls on the communicator: {[c['sequence'] for c in world]}")
            expect(world[-1]["state"] == ("completed" if r == 1 else "entered"), f"rank {r}'s last call {world[-1]}")
            expect(world[-1]["call_site"].startswith(third), f"rank {r}'s last call site {world[-1]}, expected {third}")
        d = j.get("divergence", {})
        expect(d.get("sequence") == 5 and d.get("kind") == "different_call_sites", f"divergence {d}")
        notes = {n["rank"]: n["what"] for n in d.get("ranks", [])}
        want = f"skipped MPI_Allreduce(count 1) at {skipped}"
        expect(list(notes) == [1] and notes[1].startswith(want), f"divergence names {notes}, expected rank 1: {want}")
        expect(any(f"flight recorder: rank 1 {want}" in l for _, s, l in lines), "no log line names the skipped call")
        expect(rc == 0 and "DONE" in out, f"the job must finish normally after the late call: rc={rc}")
        print("PASS: skip")
        return

    if a.mode == "cslow":
        want = site_line(a.src, "allreduce_cslow")
        expect(j["collective"] == "MPI_Allreduce" and not missing and sorted(waiting) == list(range(NP)),
               f"every rank waiting in the allreduce: {sorted(waiting)}, missing {list(missing)}")
        for r, w in waiting.items():
            expect(w["call_site"].startswith(want), f"rank {r} call site {w['call_site']}, expected {want}")
        expect_class("communication_hang", f"every member reached the call ({NP} in it) and it does not complete",
                     "communication_slow")
        expect(rc == 0 and "DONE" in out, f"the job must finish normally: rc={rc}")
        print("PASS: cslow")
        return

    kind = "sleep" if a.mode in ("hostile", "symlink") else a.mode
    nonblocking = kind in ("isleep", "isleep_thread", "itest", "ipersist", "istop")
    want_coll = {"ipersist": "MPI_Allreduce_init"}.get(kind, "MPI_Iallreduce" if nonblocking else "MPI_Allreduce")
    expect(j["collective"] == want_coll, f"collective {j['collective']}, expected {want_coll}")
    expect(list(missing) == [victim], f"missing ranks {list(missing)}, expected [{victim}]")
    site = {"sleep": "allreduce", "stop": "allreduce_stop", "kill": "allreduce_kill", "split": "allreduce_split",
            "isleep": "wait", "isleep_thread": "wait", "itest": "test", "ipersist": "pwait", "istop": "iwait_stop"}[kind]
    want = site_line(a.src, site)
    members = [1, 3] if a.mode == "split" else list(range(NP))
    expect(j["communicator"]["world_ranks"] == members, f"communicator world ranks {j['communicator']}")
    expect(sorted(waiting) == [r for r in members if r != victim], f"waiting ranks {sorted(waiting)}")
    for r, w in waiting.items():
        expect(w["call_site"].startswith(want), f"rank {r} call site {w['call_site']}, expected {want}")
    m = missing[victim]
    if kind in ("sleep", "split") or (nonblocking and kind != "istop"):
        expect(m["state"] == "not_arrived", f"state {m}")
        sl = site_line(a.src, {"sleep": "sleep", "split": "sleep_split", "ipersist": "psleep"}.get(kind, "isleep"))
        expect(sl in m["what"] and "not in MPI" in m["what"], f"missing rank's activity {m['what']}, expected {sl}")
        expect(rc == 0 and "DONE" in out, f"the job must finish normally after the sleep: rc={rc}")
        expect_class("non_communication_hang", f"never reached the call: rank {victim} not in MPI", "non_communication_slow")
    elif kind in ("stop", "istop"):
        expect(m["state"] == "not_responding" and "stopped?" in m["what"], f"state {m}")
        expect(rc == 0 and "DONE" in out, f"the job must finish after SIGCONT: rc={rc}")
        expect_class("non_communication_hang", f"never reached the call: rank {victim} not responding (stopped?)",
                     "non_communication_slow")
    elif kind == "kill":
        expect(m["state"] == "gone", f"state {m}")
        expect(class_lines[0] == f"non-communication hang: never reached the call: rank {victim} gone"
               and j["class"] == "non_communication_hang", f"class {class_lines} / {j['class']}")
    print(f"PASS: {a.mode}")


if __name__ == "__main__":
    main()
