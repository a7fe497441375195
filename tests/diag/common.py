"""Helpers shared by the diag test scripts (run_hang.py, run_report.py), which import it from
their own directory (a script's directory is first on sys.path when ctest runs it)."""
import os
import sys


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


def site_line(src, marker):
    """"file.c:N": the line of `src` that carries the comment /* SITE:marker */."""
    with open(src) as f:
        for i, line in enumerate(f, 1):
            if f"/* SITE:{marker} */" in line:
                return f"{os.path.basename(src)}:{i}"
    fail(f"no SITE:{marker} in {src}")


def launch(mpi, mpiexec, env_vars, np, argv):
    """(command, environment) that start `argv` on `np` ranks of the MPI named `mpi` with
    `env_vars` set in every rank (and LD_PRELOAD only there, not in the launcher)."""
    cmd = [mpiexec]
    if mpi == "openmpi":
        cmd += ["--allow-run-as-root", "--oversubscribe", "--bind-to", "none",
                "--mca", "btl_vader_single_copy_mechanism", "none"]
        for k, v in env_vars.items():
            cmd += ["-x", f"{k}={v}"]
    else:
        for k, v in env_vars.items():
            cmd += ["-genv", k, v]
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)
    env.update({"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"})
    return cmd + ["-n", str(np)] + list(argv), env
