#!/usr/bin/python3
"""check_layers — refuses an #include or a link across a forbidden arrow of the layer table
below (docs/architecture.md shows the same table; the unit test `layers_doc` checks that they
agree). Run by the build before libhier.so links (src/CMakeLists.txt: a forbidden include fails
the build) and by the unit tests `layers*`.

Every layer's headers are included as "<layer>/file.hpp" (or <layer/file.hpp>) from the one
include root src/, so the compiler cannot tell an allowed include from a forbidden one; this
check can. For each layer L:
  - its sources include only L, the leaves (base, util) and the layers ALLOWED[L]; the generated
    header hier/fn.hpp (interposer/api.txt's functions) only where GENERATED_USERS says, and
    the layer's library then depends on hier_generated (add_dependencies) so that it exists;
  - where src/L/CMakeLists.txt exists, L is its own library hier_L whose target_link_libraries
    name only those layers, every layer L includes directly and no layer it never includes
    (hier_base may come through a PUBLIC dependency: it carries the include root and MPI),
    PUBLIC exactly the non-leaf layers that L's headers include (a consumer of L needs them) and
    PRIVATE the ones only its .cpp files include; the leaves link nothing of libhier.
Outside src/ (when the project's tools/ and tests/ sit beside SRC_DIR): each folder with a
CMakeLists.txt includes only the layers its targets link (hier_X named there, and what those
reach through PUBLIC links), and never a header internal to a layer (INTERNAL).
Usage:
    check_layers.py SRC_DIR             (exit 1 and one line per violation when a rule is broken)
    check_layers.py --doc SRC_DIR DOC   (exit 1 when DOC's layer table differs from ALLOWED)
"""
import os
import re
import sys

LEAVES = {"base", "util"}
# layer -> {layer it may include besides itself and the leaves: why}. Every arrow has a reason;
# an arrow nothing needs is cut (the check then refuses the include, so it cannot come back
# unseen). docs/architecture.md prints this table.
ALLOWED = {
    "base": {},
    "util": {},
    "config": {},
    "diag": {"config": "the registry's settings (HIER_DEBUG, HIER_REPORT, HIER_WATCHDOG, ...)"},
    "device": {},
    "quant": {"device": "the kernels are HIER_HD bodies (device/hd.hpp) that a GPU backend compiles too",
              "config": "the collectives' names and HIER_QUANT_* settings of the report and feedback"},
    "shm": {"diag": "why a segment could not be had (HIER_DEBUG=INFO)"},
    "topo": {"config": "HIER_LEVELS and the other topology settings",
             "diag": "warnings about the detected hierarchy",
             "shm": "the level communicators own their shared-memory segments (HIER_SHM)"},
    "sched": {"topo": "builders read the shape (levels, nodes, leaders)",
              "quant": "quantized schedules size their records in quant/format.hpp's format"},
    "model": {"sched": "the planner builds and costs candidate schedules",
              "topo": "costs read the shape",
              "config": "HIER_ALGO, HIER_CHUNK, HIER_TUNE_FILE",
              "diag": "the one warning line of a rejected tune file",
              "shm": "the segment's geometry: rounds of HIER_SHM steps"},
    "dtype": {"device": "device backends, block copies and pointer kinds of the buffers it packs",
              "config": "HIER_DTYPE_* settings",
              "diag": "warnings and traces",
              "model": "the tune file: model/load.hpp reads it once and hands over its \"dtype\" object"},
    "exec": {"sched": "runs schedules", "model": "the plan of each call", "topo": "level communicators",
             "dtype": "packs non-contiguous user blocks, reads type signatures", "quant": "the quantize steps' kernels and the "
             "quantized calls' state", "device": "memory kinds of the buffers", "config": "settings",
             "diag": "traces and the report's sections", "shm": "runs level steps on the segments (HIER_SHM)"},
    "gpu": {"device": "the module table it implements, the block programs and the kernel bodies it launches",
            "quant": "the quantization kernels' bodies and their record format"},
    "core": None,  # the top: everything below
}
# Layers built as modules that libhier.so dlopens, never linked into it or by another layer:
# their includes are checked, their CMakeLists.txt makes modules instead of a hier_<layer> library.
MODULES = {"gpu": "the GPU backend modules (libhier-cuda.so, libhier-hip.so, libhier-sim.so)"}
# The generated header hier/fn.hpp (enum Fn of interposer/api.txt) and who may include it.
GENERATED = "hier"
GENERATED_USERS = {"diag": "per-function statistics and the watchdog's call names",
                   "core": "the wrappers' dispatch",
                   "exec": "the entry points' prototypes (hier/coll_entry.inc, from api.txt and collectives.def)"}
# Headers internal to their layer: no other layer, tool or test includes them.
INTERNAL = {"exec/request_engine.hpp", "exec/quant_call.hpp"}
INCLUDE = re.compile(r'^\s*#\s*include\s+["<](([a-z_]+)/[^">]+)[">]', re.M)
SOURCES = (".cpp", ".hpp", ".h", ".def", ".cu", ".hip")
HEADERS = (".hpp", ".h", ".def")
LINK = re.compile(r"target_link_libraries\(\s*hier_([a-z_]+)\b([^)]*)\)", re.S)
LIBRARY = re.compile(r"add_library\(\s*hier_([a-z_]+)\b")


def forbidden(rule, dep):
    """Whether a layer with this ALLOWED rule may not include dep (None: every layer but the modules)."""
    return dep in MODULES if rule is None else dep not in rule


def allowed_text(rule):
    return ", ".join(sorted(set(rule) | LEAVES)) or "nothing"


def includes(src, layer, bad):
    """(layers included by L's headers, by any of L's files, whether L includes hier/fn.hpp);
    forbidden includes go to bad."""
    rule = ALLOWED[layer]
    in_headers, in_any, generated = set(), set(), False
    for root, _, files in os.walk(os.path.join(src, layer)):
        for name in sorted(files):
            if not name.endswith(SOURCES):
                continue
            path = os.path.join(root, name)
            with open(path, encoding="utf-8", errors="replace") as f:
                text = f.read()
            rel = os.path.relpath(path, os.path.dirname(src))
            for m in INCLUDE.finditer(text):
                header, dep = m.group(1), m.group(2)
                line = text.count("\n", 0, m.start()) + 1
                if dep == GENERATED:
                    generated = True
                    if layer not in GENERATED_USERS:
                        bad.append(f"{rel}:{line}: {layer}/ may not include the generated {header} "
                                   f"(allowed in: {', '.join(sorted(GENERATED_USERS))})")
                    continue
                if dep not in ALLOWED or dep == layer:
                    continue  # not a layer (a system or third-party header), or itself
                in_any.add(dep)
                if name.endswith(HEADERS):
                    in_headers.add(dep)
                if header in INTERNAL:
                    bad.append(f"{rel}:{line}: {header} is internal to {dep}/")
                elif dep not in LEAVES and forbidden(rule, dep):
                    bad.append(f"{rel}:{line}: {layer}/ may not include {dep}/ (allowed: {allowed_text(rule)})")
    return in_headers, in_any, generated


def links(cmake_texts, layer):
    """{dep layer: 'PUBLIC' | 'PRIVATE' | 'INTERFACE'} of hier_<layer>, or None: no such library."""
    if not any(LIBRARY.search(t) and layer in LIBRARY.findall(t) for t in cmake_texts):
        return None
    deps = {}
    for text in cmake_texts:
        for m in LINK.finditer(text):
            if m.group(1) != layer:
                continue
            scope = "PUBLIC"  # CMake's plain signature
            for word in re.sub(r"#[^\n]*", "", m.group(2)).split():
                if word in ("PUBLIC", "PRIVATE", "INTERFACE"):
                    scope = word
                elif word.startswith("hier_"):
                    deps[word[5:]] = scope
    return deps


def check_links(src, layer, in_headers, in_any, generated, bad):
    where = f"src/{layer}/CMakeLists.txt"
    texts = [open(os.path.join(src, layer, "CMakeLists.txt"), encoding="utf-8").read()]
    top = os.path.join(os.path.dirname(src), "CMakeLists.txt")
    if os.path.exists(top):  # hier_base is declared at the top (it carries the include root)
        texts.append(open(top, encoding="utf-8").read())
    deps = links(texts, layer)
    if deps is None:
        bad.append(f"{where}: the layer is not its own library: add_library(hier_{layer} ...)")
        return None
    rule = ALLOWED[layer]
    for dep, scope in sorted(deps.items()):
        if layer in LEAVES:
            bad.append(f"{where}: hier_{layer} is a leaf and may not link hier_{dep}")
        elif dep not in ALLOWED:
            bad.append(f"{where}: hier_{layer} links hier_{dep}, which is not a layer")
        elif dep not in LEAVES and forbidden(rule, dep):
            bad.append(f"{where}: hier_{layer} may not link hier_{dep} (allowed: {allowed_text(rule)})")
        elif dep not in LEAVES and dep not in in_any:
            bad.append(f"{where}: hier_{layer} links hier_{dep}, but no file of {layer}/ includes {dep}/: "
                       "drop the link")
        elif dep not in LEAVES and scope == "PUBLIC" and dep not in in_headers:
            bad.append(f"{where}: hier_{layer} links hier_{dep} PUBLIC, but no header of {layer}/ "
                       f"includes {dep}/: link it PRIVATE")
        elif dep not in LEAVES and scope != "PUBLIC" and dep in in_headers:
            bad.append(f"{where}: a header of {layer}/ includes {dep}/, so hier_{layer} must link "
                       f"hier_{dep} PUBLIC, not {scope}")
    if layer in LEAVES:
        return deps
    if generated and not any(re.search(rf"add_dependencies\(\s*hier_{layer}\b[^)]*\bhier_generated\b", x)
                             for x in texts):
        bad.append(f"{where}: {layer}/ includes the generated hier/fn.hpp: add_dependencies(hier_{layer} "
                   "hier_generated)")
    for dep in sorted(in_any - set(deps) - {"base"}):
        if forbidden(rule, dep) and dep not in LEAVES:
            continue  # already refused as an include
        bad.append(f"{where}: {layer}/ includes {dep}/ but hier_{layer} does not link hier_{dep}")
    return deps


def reaches_base(graph, layer):
    """Whether hier_base (the include root and MPI) reaches hier_<layer> through PUBLIC links."""
    seen, frontier = set(), [layer]
    while frontier:
        cur = frontier.pop()
        if cur == "base":
            return True
        if cur in seen:
            continue
        seen.add(cur)
        frontier += [d for d, scope in (graph.get(cur) or {}).items() if scope == "PUBLIC"]
    return False


def closure(graph, libs):
    """The layers that linking `libs` gives: each, and what it reaches through PUBLIC links."""
    seen, frontier = set(), list(libs)
    while frontier:
        cur = frontier.pop()
        if cur in seen:
            continue
        seen.add(cur)
        frontier += [d for d, scope in (graph.get(cur) or {}).items() if scope == "PUBLIC"]
    return seen


def check_outside(root, graph, bad):
    """tools/ and tests/: each folder with a CMakeLists.txt includes only the layers its targets
    link (with what those reach through PUBLIC links), and no layer's internal header."""
    for top in ("tools", "tests"):
        for folder, _, files in os.walk(os.path.join(root, top)):
            if "CMakeLists.txt" not in files:
                continue
            with open(os.path.join(folder, "CMakeLists.txt"), encoding="utf-8") as f:
                cmake = re.sub(r"#[^\n]*", "", f.read())
            linked = closure(graph, {w for w in re.findall(r"\bhier_([a-z_]+)\b", cmake) if w in ALLOWED})
            linked.add("base")  # the include root comes with any of them
            # A module layer's headers where the folder builds with one of its targets (hier_gpu_sim)
            linked |= {m for m in MODULES if re.search(rf"\bhier_{m}_[a-z_]+\b", cmake)}
            for name in sorted(files):
                if not name.endswith(SOURCES + (".c",)):
                    continue
                path = os.path.join(folder, name)
                with open(path, encoding="utf-8", errors="replace") as f:
                    text = f.read()
                rel = os.path.relpath(path, root)
                for m in INCLUDE.finditer(text):
                    header, dep = m.group(1), m.group(2)
                    line = text.count("\n", 0, m.start()) + 1
                    if header in INTERNAL:
                        bad.append(f"{rel}:{line}: {header} is internal to {dep}/")
                    elif dep in ALLOWED and dep not in linked and dep not in LEAVES:
                        bad.append(f"{rel}:{line}: includes {dep}/, but {os.path.relpath(folder, root)}/CMakeLists.txt "
                                   f"links no library that gives it (hier_{dep})")


def main(src):
    bad, graph = [], {}
    layers = sorted(d for d in os.listdir(src) if os.path.isdir(os.path.join(src, d)))
    for layer in layers:
        if layer not in ALLOWED:
            bad.append(f"src/{layer}/: a layer that tools/check_layers.py does not know: add it to ALLOWED")
            continue
        in_headers, in_any, generated = includes(src, layer, bad)
        if layer not in MODULES and os.path.exists(os.path.join(src, layer, "CMakeLists.txt")):
            graph[layer] = check_links(src, layer, in_headers, in_any, generated, bad)
    for layer, deps in sorted(graph.items()):
        if deps is not None and layer not in LEAVES and not reaches_base(graph, layer):
            bad.append(f"src/{layer}/CMakeLists.txt: hier_{layer} must link hier_base PUBLIC, directly or "
                       "through a PUBLIC dependency (it carries the include root and MPI)")
    root = os.path.dirname(os.path.abspath(src))
    if os.path.isdir(os.path.join(root, "tools")) and os.path.isdir(os.path.join(root, "tests")):
        check_outside(root, {k: v for k, v in graph.items() if v is not None}, bad)
    for b in bad:
        print(b)
    return 1 if bad else 0


def doc_rows(path):
    """{layer: set of arrows} from DOC's table rows `| layer | may include | why |`."""
    rows = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            m = re.match(r"^\|\s*`([a-z_]+)/`\s*\|([^|]*)\|", line)
            if m:
                arrows = set(re.findall(r"`([a-z_]+)/`", m.group(2)))
                rows[m.group(1)] = arrows
    return rows


def check_doc(path):
    """DOC's layer table against ALLOWED: one line per difference."""
    rows, bad = doc_rows(path), []
    for layer, rule in ALLOWED.items():
        if layer not in rows:
            bad.append(f"{path}: the layer table has no row for {layer}/")
            continue
        want = set(ALLOWED) - {layer} - set(MODULES) if rule is None else set(rule)
        if rows[layer] != want:
            bad.append(f"{path}: {layer}/ may include {', '.join(sorted(want)) or 'nothing'} "
                       f"(tools/check_layers.py), the table says {', '.join(sorted(rows[layer])) or 'nothing'}")
    for layer in sorted(set(rows) - set(ALLOWED)):
        bad.append(f"{path}: the layer table has a row for {layer}/, which tools/check_layers.py does not know")
    for b in bad:
        print(b)
    return 1 if bad else 0


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--doc":
        sys.exit(check_doc(sys.argv[3]))
    if len(sys.argv) != 2:
        print("usage: check_layers.py SRC_DIR | check_layers.py --doc SRC_DIR DOC", file=sys.stderr)
        sys.exit(2)
    sys.exit(main(sys.argv[1]))
