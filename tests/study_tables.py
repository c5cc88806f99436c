"""Read back the text tables a study prints: the comment lines, and each table's rows as {heading: cell}, the
stacked parts of a table wider than the width joined again (a table is its heading line followed by a line of
dashes; its columns are the runs of dashes; parts separated by one blank line, with the same row-label
columns, are one table)."""


def _columns(rule):
    spans, start = [], None
    for i, ch in enumerate(rule + " "):
        if ch == "-" and start is None:
            start = i
        elif ch != "-" and start is not None:
            spans.append((start, i))
            start = None
    return spans


def _is_rule(line):
    return bool(line.strip()) and set(line) <= {"-", " "}


def comments(text):
    """The comment lines ('# ...') above the tables."""
    lines = text.splitlines()
    return [l for i, l in enumerate(lines)
            if l.startswith("# ") and not (i + 1 < len(lines) and _is_rule(lines[i + 1]))]


def parts(text):
    """[(headings, rows, index of the heading line)] of every printed table part, in order."""
    lines = text.splitlines()
    out = []
    i = 0
    while i + 1 < len(lines):
        if _is_rule(lines[i + 1]) and lines[i].strip():
            spans = _columns(lines[i + 1])
            heads = [lines[i][a:b].strip() for a, b in spans]
            rows, j = [], i + 2
            while j < len(lines) and lines[j].strip() and not lines[j].startswith("# "):
                rows.append([lines[j][a:b].strip() for a, b in spans])
                j += 1
            out.append((heads, rows, i))
            i = j
        else:
            i += 1
    return out


def tables(text):
    """Each table as a list of {heading: cell} rows, its stacked parts joined (the row-label columns a part
    repeats, or 'row', must agree with the first part's)."""
    out, prev_end = [], None
    lines = text.splitlines()
    for heads, rows, at in parts(text):
        dicts = [dict(zip(heads, r)) for r in rows]
        continues = (out and prev_end is not None and at == prev_end + 1 and lines[prev_end] == ""
                     and heads[0] in out[-1][0] and len(out[-1]) == len(dicts))
        if continues:
            table = out[-1]
            for row, d in zip(table, dicts):
                for k, v in d.items():
                    if k in row:
                        assert row[k] == v, (k, row[k], v)      # a repeated label, the same
                    row[k] = v
        else:
            out.append(dicts)
        prev_end = at + 2 + len(rows)
    # a table's cells without the row number, and a rejected row's 'n/a' in a later part set aside
    def plain(r):
        rejected = any(v.startswith("n/a (") for v in r.values())
        return {k: ("" if rejected and v == "n/a" else v) for k, v in r.items() if k != "row"}
    return [[plain(r) for r in t] for t in out]
