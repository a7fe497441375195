#!/usr/bin/python3
"""check_layers — refuses an #include or a link across a forbidden arrow of ARCHITECTURE.md's
layer table. Run by the build before libhier.so links (src/CMakeLists.txt: a forbidden include
fails the build) and by the unit test `layers`.

Every layer's headers are included as "<layer>/file.hpp" from the one include root src/, so the
compiler cannot tell an allowed include from a forbidden one; this check can. For each layer L:
  - its sources include only L, the leaves (base, util) and the layers ALLOWED[L];
  - where src/L/CMakeLists.txt exists, L is its own library hier_L whose target_link_libraries
    name only those layers, every layer L includes directly (hier_base may come through a
    PUBLIC dependency: it carries the include root and MPI), PUBLIC exactly the non-leaf layers that L's headers include (a
    consumer of L needs them) and PRIVATE the ones only its .cpp files include; the leaves
    link nothing of libhier.
Usage:
    check_layers.py SRC_DIR        (exit 1 and one line per violation when a rule is broken)
Keep ALLOWED in step with the layout table of ARCHITECTURE.md (and the README's layout table).
"""
import os
import re
import sys

LEAVES = {"base", "util"}
# layer -> the layers it may include besides itself and the leaves.
ALLOWED = {
    "base": set(),
    "util": set(),
    "config": set(),
    "diag": {"config"},
    "device": {"config", "diag"},
    "quant": {"device", "config", "diag"},
    "shm": {"diag"},  # shared memory of level communicators (HIER_SHM): below topo, which owns the segments
    "topo": {"config", "diag", "shm"},
    "sched": {"topo", "config", "diag", "quant"},  # quant: the record format of quantized schedules
    "model": {"sched", "topo", "config", "diag", "shm"},  # shm: the segment's geometry (HIER_SHM steps' rounds)
    "dtype": {"device", "config", "diag", "model"},
    "exec": {"sched", "model", "topo", "dtype", "quant", "device", "config", "diag", "shm"},
    "core": None,  # the top: everything below
}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([a-z_]+)/[^"]+"', re.M)
SOURCES = (".cpp", ".hpp", ".h", ".def", ".cu", ".hip")
HEADERS = (".hpp", ".h", ".def")
LINK = re.compile(r"target_link_libraries\(\s*hier_([a-z_]+)\b([^)]*)\)", re.S)
LIBRARY = re.compile(r"add_library\(\s*hier_([a-z_]+)\b")


def includes(src, layer, bad):
    """(layers included by L's headers, by any of L's files); forbidden includes go to bad."""
    rule = ALLOWED[layer]
    in_headers, in_any = set(), set()
    for root, _, files in os.walk(os.path.join(src, layer)):
        for name in sorted(files):
            if not name.endswith(SOURCES):
                continue
            path = os.path.join(root, name)
            with open(path, encoding="utf-8", errors="replace") as f:
                text = f.read()
            for m in INCLUDE.finditer(text):
                dep = m.group(1)
                if dep not in ALLOWED or dep == layer:
                    continue  # not a layer (e.g. hier/fn.hpp, generated), or itself
                in_any.add(dep)
                if name.endswith(HEADERS):
                    in_headers.add(dep)
                if dep not in LEAVES and rule is not None and dep not in rule:
                    line = text.count("\n", 0, m.start()) + 1
                    rel = os.path.relpath(path, os.path.dirname(src))
                    bad.append(f"{rel}:{line}: {layer}/ may not include {dep}/ "
                               f"(allowed: {', '.join(sorted(rule | LEAVES)) or 'nothing'})")
    return in_headers, in_any


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


def check_links(src, layer, in_headers, in_any, bad):
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
        elif dep not in LEAVES and rule is not None and dep not in rule:
            bad.append(f"{where}: hier_{layer} may not link hier_{dep} "
                       f"(allowed: {', '.join(sorted(rule | LEAVES))})")
        elif dep not in LEAVES and scope == "PUBLIC" and dep not in in_headers:
            bad.append(f"{where}: hier_{layer} links hier_{dep} PUBLIC, but no header of {layer}/ "
                       f"includes {dep}/: link it PRIVATE")
        elif dep not in LEAVES and scope != "PUBLIC" and dep in in_headers:
            bad.append(f"{where}: a header of {layer}/ includes {dep}/, so hier_{layer} must link "
                       f"hier_{dep} PUBLIC, not {scope}")
    if layer in LEAVES:
        return deps
    for dep in sorted(in_any - set(deps) - {"base"}):
        if rule is not None and dep not in rule and dep not in LEAVES:
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


def main(src):
    bad, graph = [], {}
    layers = sorted(d for d in os.listdir(src) if os.path.isdir(os.path.join(src, d)))
    for layer in layers:
        if layer not in ALLOWED:
            bad.append(f"src/{layer}/: a layer that tools/check_layers.py does not know: add it to ALLOWED")
            continue
        in_headers, in_any = includes(src, layer, bad)
        if os.path.exists(os.path.join(src, layer, "CMakeLists.txt")):
            graph[layer] = check_links(src, layer, in_headers, in_any, bad)
    for layer, deps in sorted(graph.items()):
        if deps is not None and layer not in LEAVES and not reaches_base(graph, layer):
            bad.append(f"src/{layer}/CMakeLists.txt: hier_{layer} must link hier_base PUBLIC, directly or "
                       "through a PUBLIC dependency (it carries the include root and MPI)")
    for b in bad:
        print(b)
    return 1 if bad else 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        print("usage: check_layers.py SRC_DIR", file=sys.stderr)
        sys.exit(2)
    sys.exit(main(sys.argv[1]))
