#!/usr/bin/env python3
"""Lists the tests CTest skipped, each with its reason, and a closing count per reason.

  tools/ctest_skips.py build/ctest-junit.xml

Reads the JUnit file `ctest --output-junit` writes: a skipped GoogleTest case carries its
GTEST_SKIP() message after "file:line: Skipped"; a pytest file reports its skipped cases with
-rs ("SKIPPED [n] file:line: reason"), whether CTest counted the file as skipped or passed. A
skipped test whose output names no reason is listed as "no reason given" (a defect to fix).
Standard library only: it runs before or without the project's venv.
"""
import collections
import re
import sys
import xml.etree.ElementTree as ET

GTEST_SKIP = re.compile(r"^\S+:\d+: Skipped\n(.*?)\n\[  SKIPPED \]", re.M | re.S)
PYTEST_SKIP = re.compile(r"^SKIPPED \[(\d+)\] [^:]+:\d+: (.*)$", re.M)


def clean(reason):
    reason = " ".join(reason.split())
    return reason[len("skipped: "):] if reason.startswith("skipped: ") else reason or "no reason given"


def skips(junit_path):
    """(test name, count, reason) for every skip the run reported."""
    out = []
    for case in ET.parse(junit_path).getroot().iter("testcase"):
        name = case.get("name", "?").split("  # ")[0]  # parametrized cases: "Suite.Case/fp16  # GetParam() = ..."
        text = "".join(e.text or "" for e in case.iter("system-out"))
        py = [(int(n), clean(r)) for n, r in PYTEST_SKIP.findall(text)]
        if py:
            out += [(name, n, r) for n, r in py]
        elif case.get("status") == "skipped" or case.find("skipped") is not None:
            m = GTEST_SKIP.search(text)
            reason = m.group(1).split("Google Test trace:")[0] if m else ""  # SCOPED_TRACE lines follow
            out.append((name, 1, clean(reason)))
    return out


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: ctest_skips.py JUNIT.xml")
    try:
        found = skips(sys.argv[1])
    except (OSError, ET.ParseError) as e:
        sys.exit(f"ctest_skips: cannot read {sys.argv[1]}: {e}")
    by_reason = collections.Counter()
    for name, n, reason in found:
        print(f"skipped: {name}{f' ({n} cases)' if n > 1 else ''}: {reason}")
        by_reason[reason] += n
    if found:
        print()
    for reason, n in by_reason.most_common():
        print(f"{n} skipped: {reason}")
    if not found:
        print("0 skipped")


if __name__ == "__main__":
    main()
