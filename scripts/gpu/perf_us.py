"""Two `backend_ops perf` tables side by side: per case, the us of run A, of run B and B / A.

    python3 scripts/gpu/perf_us.py OP NAME_A FILE_A NAME_B FILE_B

OP is the op column to read (e.g. Attention, NhwcFusedConv); each FILE is backend_ops perf's
output (core/table.cpp: columns two or more spaces apart; the case label in column 2, us in 3)."""
import re
import sys


def us(path, op):  # case label -> us, from the perf table's rows of `op`
    out = {}
    for line in open(path, errors="replace"):
        cells = re.split(r"\s{2,}", line.strip())
        if len(cells) >= 3 and cells[0] == op and re.match(r"^[0-9.]+$", cells[2]):
            out[cells[1]] = float(cells[2])
    return out


def main():
    op, name_a, file_a, name_b, file_b = sys.argv[1:6]
    a, b = us(file_a, op), us(file_b, op)
    print("%-55s %10s %10s %7s" % ("case", name_a + " us", name_b + " us", "B/A"))
    for k in a:
        if k in b:
            print("%-55s %10.1f %10.1f %7.2f" % (k, a[k], b[k], b[k] / a[k]))
    if not a or not b:
        print("no perf rows parsed; see", file_a, file_b)


if __name__ == "__main__":
    main()
