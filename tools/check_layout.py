#!/usr/bin/env python3
"""Checks the source layout rules of docs/dev/DESIGN.md that the compiler does not.

  check_layout.py includes   a file of src/<module>/ (and include/) includes only headers of its
                             own module or of the modules it links (their DEPS in
                             src/CMakeLists.txt, transitively: the modules below it), and the
                             folders' include graph has no cycle
  check_layout.py sizes      no file in src/ is over 500 lines
  --root DIR                 check another tree (the tests use a small one of their own)

Each prints one line per finding ("src/a/b.cpp:12: ..."), a summary line, and exits 1 when it
found something. Run from anywhere: paths are taken from this file's place in the repository.
"""
import os
import re
import sys

ROOT = SRC = INCLUDE = ""


def set_root(root):
    global ROOT, SRC, INCLUDE
    ROOT = os.path.abspath(root)
    SRC = os.path.join(ROOT, "src")
    INCLUDE = os.path.join(ROOT, "include")


set_root(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MAX_LINES = 500
SOURCE_EXT = (".h", ".hpp", ".cpp", ".cc", ".cu", ".cuh", ".inc")

# Folders that src/CMakeLists.txt builds into a module without naming them in DIRS: the ops'
# CPU side joins the engine (GPUOPT_OPS_CPU_SRCS), their cuda/ folders the CUDA backend
# (GPUOPT_OPS_CUDA_SRCS), src/backends/*.h is the engine's backend interface, and the public
# headers belong to the module that implements them.
EXTRA_UNITS = {
    "ops": "gpuopt_engine",
    "ops/cuda": "gpuopt_cuda",
    "backends": "gpuopt_engine",
    "include/core": "gpuopt_core",
    "include/gpuopt": "gpuopt_engine",
}
# The executable may include every module.
TOP = "cli"
# Known back-edges, each with its reason and where it goes; a new one fails the check.
ALLOWED_EDGES = {
    ("src/backends/cuda/plan_store.cpp", "ops/conv/cuda/cudnn_conv.h"):
        "the plan store writes cuDNN conv keys as text (ConvKey); the key belongs beside the plan "
        "cache (issue 14's plan-store work)",
}


def parse_modules(cmake_text):
    """gpuopt_module(NAME DIRS ... SRCS ... DEPS ... CUDA_DEPS ...) calls, in file order."""
    aliases = dict(re.findall(r"add_library\((\w+)\s+ALIAS\s+(\w+)\)", cmake_text))
    modules = []  # (name, dirs, deps)
    text = re.sub(r"#[^\n]*", "", cmake_text)  # comments, also after a call
    for m in re.finditer(r"gpuopt_module\(([^)]*)\)", text):
        words = m.group(1).split()
        name, key, parts = words[0], None, {"DIRS": [], "SRCS": [], "DEPS": [], "CUDA_DEPS": []}
        for w in words[1:]:
            if w in parts:
                key = w
            elif key:
                parts[key].append(w)
        modules.append((name, parts["DIRS"], [aliases.get(d, d) for d in parts["DEPS"]]))
    # Only modules count as dependencies (the generated proto libraries are plain libraries).
    names = {name for name, _, _ in modules}
    return [(name, dirs, [d for d in deps if d in names]) for name, dirs, deps in modules]


def unit_of(path):
    """The folder unit of a repository path: src/<dir>, with backends/{cpu,cuda} and the ops'
    cuda/ folders apart; include/<dir> for the public headers."""
    rel = os.path.relpath(path, ROOT).replace(os.sep, "/")
    parts = rel.split("/")
    if parts[0] == "include":
        return "include/" + parts[1]
    if parts[0] != "src" or len(parts) < 3:
        return None
    top = parts[1]
    if top == "backends":
        return "backends/" + parts[2] if len(parts) > 3 else "backends"
    if top == "ops":
        return "ops/cuda" if "cuda" in parts[2:-1] else "ops"
    return top


def resolve(include, from_file):
    for base in (INCLUDE, SRC, os.path.dirname(from_file)):
        p = os.path.normpath(os.path.join(base, include))
        if os.path.isfile(p):
            return p
    return None  # generated (onnx.pb.h, build_info.h) or a system header


def source_files(*dirs):
    for d in dirs:
        for dirpath, _, names in os.walk(d):
            for n in sorted(names):
                if n.endswith(SOURCE_EXT):
                    yield os.path.join(dirpath, n)


def check_includes():
    with open(os.path.join(SRC, "CMakeLists.txt")) as f:
        modules = parse_modules(f.read())
    findings = []
    module_of_unit = dict(EXTRA_UNITS)
    defined, closure = set(), {}
    for name, dirs, deps in modules:
        for d in deps:
            if d not in defined:
                findings.append(f"src/CMakeLists.txt: {name} links {d}, which is not a module above it")
        closure[name] = {name}.union(*(closure.get(d, {d}) for d in deps))
        defined.add(name)
        for d in dirs:
            module_of_unit[d] = name
    edges = {}  # unit -> {unit: first (file, line) that includes it}
    for path in source_files(SRC, INCLUDE):
        unit = unit_of(path)
        if unit is None:
            continue
        with open(path, errors="replace") as f:
            lines = f.read().split("\n")
        for no, line in enumerate(lines, 1):
            m = re.match(r'\s*#\s*include\s+"([^"]+)"', line)
            if not m:
                continue
            target = resolve(m.group(1), path)
            tunit = unit_of(target) if target else None
            if tunit is None or tunit == unit or (os.path.relpath(path, ROOT), m.group(1)) in ALLOWED_EDGES:
                continue
            edges.setdefault(unit, {}).setdefault(tunit, (os.path.relpath(path, ROOT), no))
            if unit == TOP:
                continue
            mod, tmod = module_of_unit.get(unit), module_of_unit.get(tunit)
            if mod is None or tmod is None:
                findings.append(f"{os.path.relpath(path, ROOT)}:{no}: folder {unit if mod is None else tunit} "
                                "is in no module of src/CMakeLists.txt")
            elif tmod not in closure.get(mod, {mod}):
                findings.append(f"{os.path.relpath(path, ROOT)}:{no}: {unit} ({mod}) includes {m.group(1)} of "
                                f"{tunit} ({tmod}), a module it does not link")
    # A cycle between folders (even inside one module) is reported once, with one include per edge.
    state, stack = {}, []

    def visit(u):
        state[u] = 1
        stack.append(u)
        for v in sorted(edges.get(u, {})):
            if state.get(v) == 1:
                cyc = stack[stack.index(v):] + [v]
                where = ", ".join(f"{a} -> {b} ({edges[a][b][0]}:{edges[a][b][1]})" for a, b in zip(cyc, cyc[1:]))
                findings.append(f"include cycle {' -> '.join(cyc)}: {where}")
            elif v not in state:
                visit(v)
        stack.pop()
        state[u] = 2

    for u in sorted(edges):
        if u not in state:
            visit(u)
    for line in findings:
        print(line)
    n_edges = sum(len(v) for v in edges.values())
    print(f"{len(findings)} layering finding(s) over {len(edges)} folders and {n_edges} include edges")
    return 1 if findings else 0


def check_sizes():
    findings = []
    for path in source_files(SRC):
        with open(path, errors="replace") as f:
            n = sum(1 for _ in f)
        if n > MAX_LINES:
            findings.append(f"{os.path.relpath(path, ROOT)}: {n} lines, over {MAX_LINES}: split it by concern")
    for line in findings:
        print(line)
    print(f"{len(findings)} file(s) in src/ over {MAX_LINES} lines")
    return 1 if findings else 0


def main(argv):
    checks = {"includes": check_includes, "sizes": check_sizes}
    args = argv[1:]
    if len(args) == 3 and args[1] == "--root":
        set_root(args[2])
        args = args[:1]
    if len(args) != 1 or args[0] not in checks:
        print(f"usage: {os.path.basename(argv[0])} includes|sizes [--root DIR]", file=sys.stderr)
        return 2
    return checks[args[0]]()


if __name__ == "__main__":
    sys.exit(main(sys.argv))
