"""docs/ops.md is generated (`gpuopt_conformance --ops-table docs/ops.md`; CTest conformance.cpu_ref
compares the whole file with a full run). The parts that need no run are checked here, in seconds:
the table lists every op of the op table (src/ir/ops_*.inc) once, in the table's order, and its
cuda column is tests/backend_ops/cuda_support.txt (which CTest backend_ops.support_list checks
against the kernels' own `supports`)."""
import os
import re

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
INC = ["ops_nn.inc", "ops_math.inc", "ops_tensor.inc", "ops_transformer.inc", "ops_misc.inc"]  # GPUOPT_OPS order


def op_table_order():
    ops = []
    for name in INC:
        text = open(os.path.join(ROOT, "src/ir", name)).read()
        body = re.sub(r"//[^\n]*|/\*.*?\*/", "", text, flags=re.S)  # comments name ops too
        ops += re.findall(r"\bX\((\w+)\)", body)
    return ops


def doc_rows():
    rows = {}
    order = []
    header = None
    for line in open(os.path.join(ROOT, "docs/ops.md")):
        if not line.startswith("| "):
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if cells[0] == "op":
            header = cells
            continue
        assert header, "a table row before the header"
        rows[cells[0]] = dict(zip(header, cells))
        order.append(cells[0])
    return header, order, rows


def cuda_support():
    out = {}
    for line in open(os.path.join(ROOT, "tests/backend_ops/cuda_support.txt")):
        if line.startswith("#") or ":" not in line:
            continue
        op, dts = line.split(":", 1)
        out[op.strip()] = dts.strip()
    return out


def test_every_op_once_in_table_order():
    header, order, _ = doc_rows()
    assert header == ["op", "opsets", "cpu-ref", "cpu", "cuda", "node tests passed", "failing tests listed in"]
    assert order == op_table_order()


def test_cuda_column_is_the_support_list():
    _, order, rows = doc_rows()
    support = cuda_support()
    for op in order:
        want = support.get(op, "-")
        want = "CPU" if want == "-" else want
        assert rows[op]["cuda"] == want, (op, rows[op]["cuda"], want)
    # Every op the list names is in the table (a stale list would name ops the table lost).
    assert set(support) <= set(order), set(support) - set(order)


def test_device_columns_name_dtypes():
    # gpuopt's dtype names (include/core/dtype.h's GPUOPT_DTYPES table).
    dtypes = set(re.findall(r'X\(\w+, \d+, [^,]+, \d+, "(\w+)"', open(os.path.join(ROOT, "include/core/dtype.h")).read()))
    assert {"f32", "f16", "bf16", "i64", "bool"} <= dtypes
    _, order, rows = doc_rows()
    for op in order:
        for col, none in (("cpu-ref", "-"), ("cpu", "ref"), ("cuda", "CPU")):
            cell = rows[op][col]
            if cell == none:
                continue
            names = [d.rstrip("*") for d in cell.split()]
            assert names and set(names) <= dtypes, (op, col, cell)
