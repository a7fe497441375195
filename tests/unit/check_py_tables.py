#!/usr/bin/python3
"""The Python tools' collectives come from src/config/collectives.def (tools/collectives.py):

    check_py_tables.py HIER_INFO

- the rows tools/collectives.py reads are the ones the C++ build compiled (hier-info's HIER_ALGO line);
- tools/bench_report.py has a link floor for every Op of the table, and none for an Op it lacks;
- no script that reads the table spells a collective's name itself (a hand list would drift), and each
  imports tools/collectives.py;
- hier-bench's size semantics (collectives.sim_bytes) cover every Buffers kind of the table.
Prints one line per failure and exits 1 on any.
"""
import os
import re
import subprocess
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
sys.path.insert(0, os.path.join(ROOT, "tools"))
import collectives  # noqa: E402
import bench_report  # noqa: E402

# The scripts that take their collectives from the table.
READERS = ["tools/bench_report.py", "bench/model/decisions.py", "bench/model/repredict.py",
           "bench/model/validate_report.py", "tools/pipeline_report.py"]

bad = []
rows = collectives.rows()
keys = [r["key"] for r in rows]
built = collectives.compiled_keys(sys.argv[1])
if built != keys:
    bad.append(f"tools/collectives.py reads {keys}, hier-info was built with {built}")
ops = {r["Op"] for r in rows}
for op in sorted(ops - set(bench_report.FLOORS)):
    bad.append(f"tools/bench_report.py: no link floor (FLOORS) for the table's Op {op}")
for op in sorted(set(bench_report.FLOORS) - ops):
    bad.append(f"tools/bench_report.py: FLOORS has {op}, which no row of the table has as its Op")
for rel in READERS:
    with open(os.path.join(ROOT, rel)) as f:
        for i, line in enumerate(f, 1):
            code = line.split("#", 1)[0]
            for k in re.findall(r"[\"']([a-z_]+)[\"']", code):
                if k in keys:
                    bad.append(f"{rel}:{i}: the collective '{k}' spelled by hand (take it from tools/collectives.py)")
# hier-bench's size semantics (collectives.sim_bytes) know every kind of argument list of the table.
kinds = collectives.BENCH_SIZE_PER_RANK | collectives.BENCH_SIZE_WHOLE
for r in rows:
    if r["Buffers"] not in kinds:
        bad.append(f"tools/collectives.py: Buffers kind {r['Buffers']} (row {r['Name']}) in neither BENCH_SIZE_PER_RANK "
                   f"nor BENCH_SIZE_WHOLE (is hier-bench's size one rank's block or the whole call's?)")
for rel in READERS:
    with open(os.path.join(ROOT, rel)) as f:
        if "import collectives" not in f.read():
            bad.append(f"{rel}: does not read the collectives from tools/collectives.py")
# decisions.py offers exactly the table's collectives.
out = subprocess.run([sys.executable, os.path.join(ROOT, "bench/model/decisions.py"), "--help"], check=True,
                     capture_output=True, text=True).stdout
m = re.search(r"--colls \{([a-z_,]+)\}", out)
if not m or m.group(1).split(",") != keys:
    bad.append(f"bench/model/decisions.py --colls offers {m.group(1) if m else None}, the table has {keys}")
for b in bad:
    print(b)
sys.exit(1 if bad else 0)
