#!/usr/bin/env python3
"""fault_case.py -- one case of the GPU runtime fault-injection sweep (tests/device/CMakeLists.txt).

    fault_case.py [--must-error] -- <launcher command with FAKE_GPU_FAIL set>

A runtime entry point that libhier calls answers an error (FAKE_GPU_FAIL, tests/device/fake_gpu.h).
The run must end in one of the two ways the issue allows:
  - it passes: libhier fell back (host memory, the MPI's own algorithm, the default stream) and
    every result is the reference result (the test program checks them byte for byte);
  - it stops with an MPI error raised through the communicator's error handler
    (MPI_ERRORS_ARE_FATAL, the default), as the MPI stops on its own errors.
It must never: crash (a signal, or the stand-in device's "host access to device memory"), hang
(ctest's timeout, and ours below), or give a wrong answer (a gtest failure line).
--must-error: the case cannot succeed (every staging copy fails), so passing means libhier ignored
the runtime's error: that fails too.
"""
import re
import subprocess
import sys

CRASH = re.compile(r"FAKE_GPU: host access|Segmentation fault|signal 11|SIGSEGV|SIGABRT|signal 6|"
                   r"Bus error|core dumped|exited on signal|BAD TERMINATION.*(SEGMENTATION|ABORT)|"
                   r"Invalid MPI_Request|MPI_ERR_REQUEST|Assertion .* failed")
WRONG = re.compile(r"^\[  FAILED  \]|: Failure$", re.M)
# The MPI's own report of an error raised on a communicator with MPI_ERRORS_ARE_FATAL, or
# libhier's line before it raises its own (core/errors.hpp, raise_own): Open MPI's launcher at
# times loses the ranks' lines when every rank aborts at once, and says only that it could not
# print the abort's help text (ORTE_ERROR_LOG in show_help.c); its exit status is then the
# error code the ranks aborted with (MPI_ERR_OTHER: 16).
MPI_ERROR = re.compile(r"MPI_ERRORS_ARE_FATAL|Fatal error in (P)?MPI_|MPI_ERR_(OTHER|NO_MEM|INTERN|TYPE)|"
                       r"failed inside libhier before the MPI saw it|"
                       r"ORTE_ERROR_LOG: .* in file .*show_help\.c")


def main():
    args = sys.argv[1:]
    must_error = False
    if args and args[0] == "--must-error":
        must_error, args = True, args[1:]
    if args and args[0] == "--":
        args = args[1:]
    try:
        p = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=150)
    except subprocess.TimeoutExpired as e:
        out = e.stdout if isinstance(e.stdout, str) else (e.stdout or b"").decode(errors="replace")
        print(out[-4000:])
        print("fault_case: HANG (no end within 150 s)")
        return 1
    out = p.stdout
    print(out[-6000:])
    if CRASH.search(out):
        print(f"fault_case: CRASH (exit {p.returncode}): {CRASH.search(out).group(0)!r}")
        return 1
    if WRONG.search(out):
        print(f"fault_case: WRONG ANSWER (exit {p.returncode})")
        return 1
    if p.returncode == 0:
        if must_error:
            print("fault_case: the run passed although every staging copy failed: an error was ignored")
            return 1
        print("fault_case: ok (passed with the injected failure: libhier fell back)")
        return 0
    if p.returncode < 0 or p.returncode in (77, 134, 139):
        print(f"fault_case: CRASH (exit {p.returncode})")
        return 1
    if MPI_ERROR.search(out):
        print(f"fault_case: ok (stopped with an MPI error: {MPI_ERROR.search(out).group(0)!r})")
        return 0
    print(f"fault_case: FAILED (exit {p.returncode} without an MPI error)")
    return 1


if __name__ == "__main__":
    sys.exit(main())
