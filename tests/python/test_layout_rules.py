"""The layout rules of docs/dev/DESIGN.md that the compiler does not check (tools/check_layout.py):
modules include only the modules they link (no include cycle between folders), and no file in
src/ is over 500 lines. Each rule runs on the repository and on a small tree that breaks it, so
the check is seen to fail where it should."""
import os
import subprocess
import sys

ROOT = os.environ.get("GPUOPT_TEST_SOURCE_DIR") or os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CHECK = os.path.join(ROOT, "tools", "check_layout.py")


def run(*args):
    r = subprocess.run([sys.executable, CHECK, *args], capture_output=True, text=True, timeout=120)
    return r.returncode, r.stdout + r.stderr


def write(root, rel, text):
    path = os.path.join(root, rel)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)


def small_tree(root):
    # base below top: top may include base, not the other way round.
    write(root, "src/CMakeLists.txt",
          "gpuopt_module(gpuopt_base DIRS base DEPS Threads::Threads)  # a comment after the call\n"
          "# gpuopt_module(gpuopt_old DIRS top) in a comment is no module\n"
          "gpuopt_module(gpuopt_top DIRS top\n  DEPS gpuopt_base)\n")
    write(root, "src/base/a.h", "#pragma once\n")
    write(root, "src/top/b.h", '#pragma once\n#include "base/a.h"\n')


def test_repository_includes_follow_the_module_order():
    rc, out = run("includes")
    assert rc == 0, out
    assert "0 layering finding(s)" in out


def test_repository_files_are_at_most_500_lines():
    rc, out = run("sizes")
    assert rc == 0, out


def test_an_upward_include_and_its_cycle_are_found(tmp_path):
    small_tree(str(tmp_path))
    rc, out = run("includes", "--root", str(tmp_path))
    assert rc == 0, out
    write(str(tmp_path), "src/base/a.cpp", '#include "base/a.h"\n\n#include "top/b.h"\n')
    rc, out = run("includes", "--root", str(tmp_path))
    assert rc == 1, out
    assert "src/base/a.cpp:3: base (gpuopt_base) includes top/b.h of top (gpuopt_top), a module it does not link" in out
    assert "include cycle base -> top -> base" in out


def test_a_folder_in_no_module_is_named(tmp_path):
    small_tree(str(tmp_path))
    write(str(tmp_path), "src/stray/c.cpp", '#include "base/a.h"\n')
    rc, out = run("includes", "--root", str(tmp_path))
    assert rc == 1
    assert "folder stray is in no module" in out


def test_a_long_file_is_found(tmp_path):
    small_tree(str(tmp_path))
    write(str(tmp_path), "src/top/long.cpp", "int x;\n" * 501)
    rc, out = run("sizes", "--root", str(tmp_path))
    assert rc == 1
    assert "src/top/long.cpp: 501 lines, over 500" in out
    write(str(tmp_path), "src/top/long.cpp", "int x;\n" * 500)
    rc, out = run("sizes", "--root", str(tmp_path))
    assert rc == 0, out
