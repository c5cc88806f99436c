"""Shape metrics of the kernel room (docs/developer.md, "Kernel room"): functions longer than a limit, records with
more fields than a limit, and lines that compare an ISA code outside the selector.

    python tools/kernel_metrics.py [--max-lines 80] [--max-fields 40]

Exit status 1 when any limit is exceeded (tests/test_generated.py::test_kernel_room_shape_limits runs it).
"""
import argparse
import pathlib
import re
import sys

KERNELS = pathlib.Path(__file__).resolve().parent.parent / "pyconvtbc" / "_kernels"
SELECTOR = "_ukr_select.c"
FUNC = re.compile(r"^(?:static |CT_I\d+ |CT_GEN )[^;{=]*?\b(\w+)\s*\([^;{]*\)\s*\{", re.M | re.S)


def sources():
    return sorted(p for p in KERNELS.iterdir() if p.suffix in (".h", ".c") and not p.name.startswith("_fptables")
                  and not (p.suffix == ".c" and not p.name.startswith("_ukr")))


def long_functions(text, limit):
    out = []
    for m in FUNC.finditer(text):
        start = text.count("\n", 0, m.start()) + 1
        depth, i = 1, m.end()
        while depth and i < len(text):             # the matching brace
            depth += {"{": 1, "}": -1}.get(text[i], 0)
            i += 1
        n = text.count("\n", m.start(), i) + 1
        if n > limit:
            out.append((m.group(1), start, n))
    return out


def wide_records(text, limit):
    out = []
    for m in re.finditer(r"typedef struct\s*\w*\s*\{(.*?)\}\s*(\w+);", text, re.S):
        body = re.sub(r"/\*.*?\*/", "", m.group(1), flags=re.S)
        fields = 0
        for decl in body.split(";"):
            decl = decl.strip()
            if decl:
                fields += decl.count(",") + 1 if "(" not in decl else 1
        if fields > limit:
            out.append((m.group(2), fields))
    return out


def isa_comparisons(path, text):
    if path.name == SELECTOR:
        return []
    code = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    return [ln for ln in code.splitlines() if re.search(r"isa\s*[=!]=|[=!]=\s*CT_ISA|CT_ISA_\w+\s*:", ln)]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--max-lines", type=int, default=80)
    ap.add_argument("--max-fields", type=int, default=40)
    a = ap.parse_args(argv)
    bad = 0
    for p in sources():
        t = p.read_text(encoding="utf-8")
        for name, line, n in long_functions(t, a.max_lines):
            print(f"{p.name}:{line}: function {name} has {n} lines (limit {a.max_lines})")
            bad += 1
        for name, n in wide_records(t, a.max_fields):
            print(f"{p.name}: record {name} has {n} fields (limit {a.max_fields})")
            bad += 1
        for ln in isa_comparisons(p, t):
            print(f"{p.name}: compares an ISA code outside {SELECTOR}: {ln.strip()}")
            bad += 1
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
