#!/usr/bin/env python3
"""Checks `cmake --install` of one build as a user meets it (see tests/install/CMakeLists.txt).

  check_install.py layout    COMMON --app PROG -- LAUNCHER
                                                 files where README "Installing" says; hier-run
                                                 --dry-run picks libhier for PROG, refuses a
                                                 script, honours HIER_MPI, refuses a missing MPI
  check_install.py run       COMMON --app PROG -- LAUNCHER FLAGS...
                                                 hier-run LAUNCHER FLAGS -n 2 PROG: the ranks'
                                                 reports show libhier was loaded
  check_install.py consumers COMMON --mpicc CC --consumer DIR -- LAUNCHER FLAGS...
                                                 pkg-config and find_package(hier) link libhier
  check_install.py mpi4py    COMMON --mpicc CC [--real] -- LAUNCHER FLAGS...
                                                 hier-run with a Python program: the MPI of the
                                                 mpi4py module the interpreter would import (a
                                                 fake module built with CC on PYTHONPATH; --real:
                                                 Debian's python3-mpi4py, run for real under
                                                 Open MPI, exit 77 when it is absent)
  check_install.py uninstall COMMON              the uninstall target removes every file
  check_install.py help      COMMON --source DIR [--program EXE]...
                                                 every command a user runs answers --help with
                                                 exit status 0 and a "usage:" line on stdout: each
                                                 installed program (PREFIX/bin), each --program (the
                                                 build's own, e.g. hier-sim), each executable
                                                 file in DIR/tools and under DIR/bench
COMMON: --build DIR --mpi openmpi|mpich --libdir LIBDIR --work DIR (a fresh prefix under it)

cmake --install rewrites <build>/install_manifest.txt: a user's manifest is put back afterwards.
"""
import argparse
import concurrent.futures
import glob
import json
import os
import re
import shutil
import subprocess
import sys

FAMILY_NAME = {"openmpi": "Open MPI", "mpich": "MPICH"}


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


def run(cmd, env=None, check=True, **kw):
    print("+", " ".join(cmd), flush=True)
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=180, **kw)
    if check and p.returncode != 0:
        fail(f"exit {p.returncode}: {' '.join(cmd)}\n{p.stdout}\n{p.stderr}")
    return p


def clean_env(**extra):
    """The caller's environment without any preload or HIER_* setting of its own."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("HIER_") and k != "LD_PRELOAD"}
    env.update(extra)
    return env


class Install:
    """A fresh prefix with this build installed; the build's own manifest restored on exit."""

    def __init__(self, a):
        self.a = a
        self.prefix = os.path.join(a.work, "prefix")
        self.manifest = os.path.join(a.build, "install_manifest.txt")
        self.saved = self.manifest + ".saved-by-test"

    def __enter__(self):
        shutil.rmtree(self.a.work, ignore_errors=True)
        os.makedirs(self.a.work)
        if os.path.exists(self.manifest):
            shutil.copy2(self.manifest, self.saved)
        run(["cmake", "--install", self.a.build, "--prefix", self.prefix])
        return self

    def __exit__(self, *exc):
        if os.path.exists(self.saved):
            os.replace(self.saved, self.manifest)

    def path(self, rel):
        return os.path.join(self.prefix, rel)

    def hier_run(self, *args, env=None, check=True):
        return run([self.path("bin/hier-run"), *args], env=env or clean_env(), check=check)


def expected_files(a):
    lib, mpi = a.libdir, a.mpi
    return [f"{lib}/hier/{mpi}/libhier.so", f"bin/hier-info-{mpi}", f"bin/hier-tune-{mpi}", "bin/hier-run", "bin/hier-report",
            f"{lib}/pkgconfig/hier-{mpi}.pc", f"{lib}/cmake/hier/hier-config.cmake",
            f"{lib}/cmake/hier/hier-config-version.cmake", f"{lib}/cmake/hier/hier-{mpi}-targets.cmake",
            "share/doc/libhier/README.md", "share/doc/libhier/docs/collectives.md", "share/doc/libhier/docs/img/hier-report-straggle.png",
            "share/libhier/examples/train_mlp.cpp"] + [f"{lib}/hier/{mpi}/{m}" for m in a.gpu_module]


def other(mpi):
    return "mpich" if mpi == "openmpi" else "openmpi"


def expect_refusal(p, what, words):
    lines = p.stderr.strip().splitlines()
    if p.returncode != 2 or len(lines) != 1 or not all(w in lines[0] for w in words):
        fail(f"{what}: expected one line on stderr naming {words} and exit 2, got exit {p.returncode}:\n{p.stderr}")
    print("refused as expected:", lines[0])


def cmd_layout(a):
    with Install(a) as inst:
        for rel in expected_files(a):
            f = inst.path(rel)
            if not os.path.isfile(f):
                fail(f"not installed: {rel}")
            if rel.startswith("bin/") and not os.access(f, os.X_OK):
                fail(f"not executable: {rel}")
        lib = inst.path(f"{a.libdir}/hier/{a.mpi}/libhier.so")
        # The program's MPI decides; an LD_PRELOAD already set is kept behind libhier.
        p = inst.hier_run("--dry-run", "mpiexec", "-n", "2", a.app, "--flag",
                          env=clean_env(LD_PRELOAD="/opt/other.so", HIER_LEVELS="node:2"))
        if f"LD_PRELOAD={lib}:/opt/other.so" not in p.stdout.splitlines():
            fail(f"dry run does not preload {lib} before the existing LD_PRELOAD:\n{p.stdout}")
        if "HIER_LEVELS=node:2" not in p.stdout.splitlines() or not p.stdout.rstrip().endswith(f"{a.app} --flag"):
            fail(f"dry run lost HIER_LEVELS or the program's arguments:\n{p.stdout}")
        # Open MPI's launcher passes only -x variables to remote ranks; hydra passes them all.
        p = inst.hier_run("--dry-run", a.launcher[0], "-n", "2", a.app, env=clean_env(HIER_LEVELS="node:2"))
        has_x = "-x LD_PRELOAD -x HIER_LEVELS -n 2" in p.stdout.splitlines()[-1]
        if has_x != (a.mpi == "openmpi"):
            fail(f"{a.launcher[0]}: -x options expected only for Open MPI:\n{p.stdout}")
        # srun forwards the environment itself: no Open MPI -x options for it.
        p = inst.hier_run("--dry-run", "srun", "-N", "1", a.app)
        if p.stdout.splitlines()[-1] != f"srun -N 1 {a.app}":
            fail(f"srun command changed: {p.stdout}")
        # A shell script: no ELF dependencies to read.
        script = os.path.join(a.work, "job.sh")
        with open(script, "w") as f:
            f.write("#!/bin/sh\nexec true\n")
        os.chmod(script, 0o755)
        expect_refusal(inst.hier_run("--dry-run", "srun", script, check=False), "shell script",
                       ["cannot tell the MPI", "HIER_MPI"])
        for how in (["--mpi", a.mpi], []):
            p = inst.hier_run("--dry-run", *how, "srun", script, env=clean_env(HIER_MPI=a.mpi))
            if f"LD_PRELOAD={lib}" not in p.stdout.splitlines() or "HIER_MPI" in p.stdout:
                fail(f"{how or 'HIER_MPI'}: expected {lib}, HIER_MPI consumed:\n{p.stdout}")
        expect_refusal(inst.hier_run("--dry-run", "srun", script, env=clean_env(HIER_MPI=other(a.mpi)), check=False),
                       "other MPI not installed", ["not installed", other(a.mpi)])
    print("layout ok")


def reports(pattern, n, mpi):
    files = sorted(glob.glob(pattern.replace("%r", "*")))
    if len(files) != n:
        fail(f"expected {n} reports {pattern}, found {files}: libhier was not loaded on every rank")
    for f in files:
        with open(f) as fh:
            rep = json.load(fh)
        if rep.get("format") != "libhier-report/1" or rep["libhier"]["built_for"] != FAMILY_NAME[mpi]:
            fail(f"{f}: not a report of libhier for {mpi}: {rep.get('libhier')}")
        if rep["functions"].get("MPI_Allreduce", {}).get("calls", 0) < 1:
            fail(f"{f}: no MPI_Allreduce went through libhier")
    print("reports ok:", " ".join(files))


def cmd_run(a):
    with Install(a) as inst:
        pattern = os.path.join(a.work, "report.%r.json")
        p = inst.hier_run(*a.launcher, "-n", "2", a.app, env=clean_env(HIER_REPORT=pattern))
        print(p.stdout[-2000:])
        reports(pattern, 2, a.mpi)
    print("run ok")


def needs_libhier(exe, lib):
    out = run(["ldd", exe]).stdout
    loaded = [os.path.realpath(l.split("=>")[1].split("(")[0].strip()) for l in out.splitlines() if "=>" in l]
    if os.path.realpath(lib) not in loaded:
        fail(f"{exe} does not load {lib}:\n{out}")


def cmd_consumers(a):
    with Install(a) as inst:
        lib = inst.path(f"{a.libdir}/hier/{a.mpi}/libhier.so")
        env = clean_env(PKG_CONFIG_PATH=inst.path(f"{a.libdir}/pkgconfig"))
        flags = run(["pkg-config", "--cflags", "--libs", f"hier-{a.mpi}"], env=env).stdout.split()
        print("pkg-config:", " ".join(flags))
        exe = os.path.join(a.work, "pc_consumer")
        run([a.mpicc, os.path.join(a.consumer, "main.c"), "-o", exe, *flags], env=env)
        needs_libhier(exe, lib)
        build = os.path.join(a.work, "cmake_consumer")
        run(["cmake", "-S", a.consumer, "-B", build, "-G", "Ninja", f"-DCMAKE_PREFIX_PATH={inst.prefix}",
             f"-DHIER_MPI={a.mpi}", f"-DCMAKE_C_COMPILER={a.mpicc}"], env=clean_env())
        run(["cmake", "--build", build], env=clean_env())
        exe = os.path.join(build, "consumer")
        needs_libhier(exe, lib)
        # Linked, not preloaded: the report still appears.
        pattern = os.path.join(a.work, "report.%r.json")
        run([*a.launcher, "-n", "1", exe], env=clean_env(HIER_REPORT=pattern))
        reports(pattern, 1, a.mpi)
        # Asking for an MPI build that is not installed fails at configure time.
        p = run(["cmake", "-S", a.consumer, "-B", build + "-other", "-G", "Ninja", f"-DCMAKE_PREFIX_PATH={inst.prefix}",
                 f"-DHIER_MPI={other(a.mpi)}", f"-DCMAKE_C_COMPILER={a.mpicc}"], env=clean_env(), check=False)
        if p.returncode == 0:
            fail(f"find_package(hier COMPONENTS {other(a.mpi)}) succeeded without that build installed")
    print("consumers ok")


SYS_PYTHON = "/usr/bin/python3"  # Debian's: the interpreter python3-mpi4py belongs to


def cmd_mpi4py(a):
    if a.real:
        return mpi4py_real(a)
    with Install(a) as inst:
        lib = inst.path(f"{a.libdir}/hier/{a.mpi}/libhier.so")
        # A module dir that looks like mpi4py to the import system: mpi4py/MPI<ext suffix>, an
        # ELF linked against this build's MPI (what ldd looks at) and an empty __init__.py:
        # a test fixture standing in for Debian's mpi4py, whose MPI family hier-run must find.
        py = sys.executable
        suffix = run([py, "-c", "import importlib.machinery as m; print(m.EXTENSION_SUFFIXES[0])"]).stdout.strip()
        mod = os.path.join(a.work, "pylib", "mpi4py")
        os.makedirs(mod)
        with open(os.path.join(mod, "__init__.py"), "w") as f:
            f.write("")
        src = os.path.join(a.work, "fake_mpi4py_ext.c")
        with open(src, "w") as f:
            f.write("#include <mpi.h>\nint fake_mpi4py_ext(void) { int f = 0; MPI_Initialized(&f); return f; }\n")
        run([a.mpicc, "-shared", "-fPIC", "-o", os.path.join(mod, "MPI" + suffix), src])
        script = os.path.join(a.work, "train.py")
        with open(script, "w") as f:
            f.write(f"#!{py}\nfrom mpi4py import MPI\n")
        os.chmod(script, 0o755)
        env = clean_env(PYTHONPATH=os.path.join(a.work, "pylib"))
        for cmd in (["srun", "-N", "2", py, script], ["srun", script], ["srun", "--", py, "-u", script]):
            p = inst.hier_run("--dry-run", *cmd, env=env)
            if f"LD_PRELOAD={lib}" not in p.stdout.splitlines():
                fail(f"{cmd}: expected {lib} from the fake mpi4py:\n{p.stdout}")
        # The same script without the module on the path (where the interpreter has no mpi4py
        # of its own): refused, naming the way out.
        if not _has_mpi4py(py):
            expect_refusal(inst.hier_run("--dry-run", "srun", py, script, check=False),
                           "python without mpi4py", ["has no mpi4py", "HIER_MPI"])
    print("mpi4py (fake module) ok")


def _has_mpi4py(py):
    return run([py, "-c", "import importlib.util as u; print(bool(u.find_spec('mpi4py')))"]).stdout.strip() == "True"


def mpi4py_real(a):
    if not os.path.exists(SYS_PYTHON) or not _has_mpi4py(SYS_PYTHON):
        print(f"SKIP: {SYS_PYTHON} has no mpi4py (Debian: apt-get install python3-mpi4py)")
        sys.exit(77)
    origin = run([SYS_PYTHON, "-c", "import importlib.util as u; print(u.find_spec('mpi4py.MPI').origin)"]).stdout.strip()
    fam = "openmpi" if "libmpi.so.40" in run(["ldd", origin]).stdout else "mpich"
    with Install(a) as inst:
        script = os.path.join(a.work, "allreduce.py")
        with open(script, "w") as f:
            f.write("from mpi4py import MPI\nimport array\nc = MPI.COMM_WORLD\n"
                    "s = array.array('i', [c.rank + 1] * 4096); r = array.array('i', [0] * 4096)\n"
                    "c.Allreduce(s, r, op=MPI.SUM)\nn = c.size\n"
                    "assert all(x == n * (n + 1) // 2 for x in r), 'wrong sum'\n"
                    # one write per rank: the ranks share the launcher's stdout, and print()'s
                    # separate writes of its arguments interleaved ("rank 1 rankok")
                    "import sys\nsys.stdout.write(f'rank {c.rank} ok\\n'); sys.stdout.flush()\n")
        if fam != a.mpi:
            # Debian's mpi4py is for the other MPI: hier-run finds that MPI and says its libhier is missing.
            expect_refusal(inst.hier_run("--dry-run", "srun", SYS_PYTHON, script, check=False),
                           f"mpi4py of {fam}", ["not installed", fam])
            print(f"mpi4py (Debian's, {fam}) ok: refused for this {a.mpi} install")
            return
        pattern = os.path.join(a.work, "report.%r.json")
        p = inst.hier_run(*a.launcher, "-n", "2", SYS_PYTHON, script, env=clean_env(HIER_REPORT=pattern))
        print(p.stdout[-1000:])
        if p.stdout.count(" ok") != 2:
            fail(f"expected two ranks ok:\n{p.stdout}\n{p.stderr}")
        reports(pattern, 2, a.mpi)
    print(f"mpi4py (Debian's, {fam}) ok")


def files_under(d):
    return sorted(os.path.relpath(os.path.join(r, f), d) for r, _, fs in os.walk(d) for f in fs)


def cmd_uninstall(a):
    with Install(a) as inst:
        # Another MPI's build in the same prefix keeps the shared files (hier-run, docs, config).
        fake = inst.path(f"{a.libdir}/hier/{other(a.mpi)}/libhier.so")
        os.makedirs(os.path.dirname(fake))
        open(fake, "w").close()
        run(["cmake", "--build", a.build, "--target", "uninstall"])
        left = files_under(inst.prefix)
        mine = [f for f in left if a.mpi in f]
        if mine or "bin/hier-run" not in left or f"{a.libdir}/cmake/hier/hier-config.cmake" not in left:
            fail(f"with {other(a.mpi)} installed, expected its files and the shared ones left, got {left}")
        # The last build out takes everything with it, folders included.
        os.remove(fake)
        os.rmdir(os.path.dirname(fake))
        run(["cmake", "--build", a.build, "--target", "uninstall"])
        left = files_under(inst.prefix)
        dirs = [r for r, _, _ in os.walk(inst.prefix) if "hier" in os.path.relpath(r, inst.prefix)]
        if left or dirs:
            fail(f"left behind after uninstall: files {left}, folders {dirs}")
    print("uninstall ok")


def answers_help(cmd, cwd):
    """'' when `cmd --help` exits 0 with a usage line on stdout, else what went wrong."""
    try:
        # A session of its own: a command that instead starts working (a build, a cluster) is
        # ended with everything it started when the time is up.
        p = subprocess.Popen([cmd, "--help"], cwd=cwd, env=clean_env(), stdin=subprocess.DEVNULL,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
        out, err = p.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, 9)
        p.communicate()
        return "still running after 60 s (it did not answer --help)"
    if p.returncode != 0:
        return f"exit status {p.returncode}\n{out}{err}"
    if not re.search(r"(?im)^\s*usage:", out):
        return f"no 'usage:' line on stdout\n{out}{err}"
    return ""


def cmd_help(a):
    tools = os.path.join(a.source, "tools")
    with Install(a) as inst:
        bindir = inst.path("bin")
        cmds = [os.path.join(bindir, f) for f in sorted(os.listdir(bindir))]
        cmds += a.program
        cmds += [os.path.join(tools, f) for f in sorted(os.listdir(tools))
                 if os.path.isfile(os.path.join(tools, f)) and os.access(os.path.join(tools, f), os.X_OK)]
        # bench/'s scripts (the README's results table names them), at any depth
        for d, _, files in sorted(os.walk(os.path.join(a.source, "bench"))):
            cmds += [os.path.join(d, f) for f in sorted(files) if os.access(os.path.join(d, f), os.X_OK)]
        if not all(any(c.endswith(x) for c in cmds) for x in ("/hier-run", "/demo.sh", "/bench/overhead/run.sh")):
            fail(f"the list of commands misses hier-run, tools/demo.sh or bench/overhead/run.sh: {cmds}")
        bad = []
        # Four at a time: most of each command's time is its interpreter starting.
        with concurrent.futures.ThreadPoolExecutor(max_workers=4) as pool:
            whys = list(pool.map(lambda c: answers_help(c, a.work), cmds))
        for c, why in zip(cmds, whys):
            print(("ok    " if not why else "FAIL  ") + c + ("" if not why else ": " + why.splitlines()[0]), flush=True)
            if why:
                bad.append(f"{c} --help: {why}")
        if bad:
            fail(f"{len(bad)} of {len(cmds)} commands do not answer --help:\n" + "\n".join(bad))
    print(f"help ok: {len(cmds)} commands")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["layout", "run", "consumers", "mpi4py", "uninstall", "help"])
    ap.add_argument("--build", required=True)
    ap.add_argument("--mpi", required=True, choices=["openmpi", "mpich"])
    ap.add_argument("--libdir", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--app")
    ap.add_argument("--mpicc")
    ap.add_argument("--consumer")
    ap.add_argument("--real", action="store_true")
    ap.add_argument("--source", help="the source tree (help: its tools/ folder)")
    ap.add_argument("--program", action="append", default=[], help="help: a program of the build's")
    ap.add_argument("--gpu-module", action="append", default=[],
                    help="a GPU module file name this build made, expected beside libhier.so")
    argv = sys.argv[1:]
    sep = argv.index("--") if "--" in argv else len(argv)
    a = ap.parse_args(argv[:sep])
    a.launcher = argv[sep + 1:]  # the launcher's own options start with '-': not for argparse
    globals()["cmd_" + a.mode](a)


if __name__ == "__main__":
    main()
