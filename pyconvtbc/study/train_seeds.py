"""``study train --seeds N``: the training study over N seeds (data and initial weights), each mode's final loss
and its deviation from torch's as a mean with a 95 % interval (Student's t), so a mode's effect can be set
against the seed-to-seed spread.

Seeds seed .. seed+N-1; for each seed every mode trains from that seed's weights on that seed's batches
(``train.train_modes``).  Per mode: ``final`` = the mean loss of the last tenth of the steps, ``vs torch`` =
final / torch's final of the same seed - 1 (paired: the spread of the data cancels in it).  Rows come out as
they finish (``on_row``), the torch reference first.
"""
from __future__ import annotations

import numpy as np

from .repeat import mean_interval
from .train import DEFAULT_TRAIN_MODES, REFERENCE_MODE, TRAIN_MODES, _int, _norm_modes, train_modes


def train_seeds(modes=DEFAULT_TRAIN_MODES, *, seeds=5, seed=0, on_row=None, **kw):
    """Train every mode on ``seeds`` seeds (seed, seed+1, ...); ``kw``: the other ``train_modes`` keywords.
    ``on_row(row)`` is called as each mode's row is complete.  Returns a ``SeedsResult``."""
    modes = _norm_modes(modes)
    n = _int("seeds", seeds, 2, 1000)
    seed = _int("seed", seed, 0, 2 ** 32 - 1 - n)
    order = ([REFERENCE_MODE] if REFERENCE_MODE in modes else []) + [m for m in modes if m != REFERENCE_MODE]
    ref_final = {}
    rows, meta = [], None
    for m in order:
        finals, devs, ms, status = [], [], [], None
        for s in range(seed, seed + n):
            r = train_modes([m], seed=s, **kw)
            meta = r.meta
            if m in r.meta["rejected"]:
                status = r.meta["rejected"][m]["status"]
                break
            summary = r.summary_rows()[0]
            finals.append(summary["final"])
            ms.append(summary["ms_per_step"])
            if m == REFERENCE_MODE:
                ref_final[s] = summary["final"]
            elif s in ref_final:
                devs.append(summary["final"] / ref_final[s] - 1)
        row = {"mode": m, "what": TRAIN_MODES[m][2], "seeds": n, "status": status}
        if status is None:
            row["final"], row["final_lo"], row["final_hi"] = mean_interval(finals, (0.0, None))
            row["vs_torch"], row["vs_torch_lo"], row["vs_torch_hi"] = (mean_interval(devs) if devs
                                                                       else (None, None, None))
            row["finals"], row["ms_per_step"] = finals, float(np.median(ms))
        rows.append(row)
        if on_row is not None:
            on_row(row)
    meta = dict(meta or {}, modes=list(order), seeds=list(range(seed, seed + n)))
    meta.pop("seed", None)
    return SeedsResult(rows, meta)


def _interval(row, key, pct=False):
    m, lo, hi = row.get(key), row.get(f"{key}_lo"), row.get(f"{key}_hi")
    if m is None:
        return "-"
    if pct:
        return f"{_pct(100 * m, True)}% ±{_pct(100 * (hi - lo) / 2)}%"
    return f"{m:.4f} ±{(hi - lo) / 2:.4f}"


def _pct(v, sign=False):
    """A percentage: 3 decimals, or 2 significant digits below 0.001 (so a tiny deviation never reads 0.000)."""
    if v == 0 or abs(v) >= 1e-3:
        return f"{v:+.3f}" if sign else f"{v:.3f}"
    return f"{v:+.1e}" if sign else f"{v:.1e}"


HEADERS = ("mode", "final loss (95% CI)", "vs torch (95% CI)", "seeds", "ms/step")
WIDTHS = (26, 20, 22, 5, 9)


def header_lines(meta_like, width=None):
    """The table's header (printed before the first row): the setup (comment lines at most ``width``
    characters, default ``TABLE_WIDTH``; 0: one line each), then the column heads."""
    from .table import TABLE_WIDTH, _comment
    m = meta_like
    width = TABLE_WIDTH if width is None else width
    return (_comment([f"training over seeds {m['seeds'][0]}..{m['seeds'][-1]}: {m['layers']} ConvTBC layers (dim "
                      f"{m['dim']}, K={m['kernel']}, GLU), vocab {m['vocab']}, T={m['length']} B={m['batch']}, "
                      f"{m['steps']} steps of SGD (lr {m['lr']:g}, Nesterov 0.9, clip {m['clip']:g})"], width)
            + _comment(["final loss: mean of the last tenth of the steps", "vs torch: final / torch's final of the "
                        "same seed - 1", "mean ±half-width of the 95 % interval (t)"], width, sep="; ")
            + ["  ".join(h.ljust(w) if i == 0 else h.rjust(w) for i, (h, w) in enumerate(zip(HEADERS, WIDTHS))),
               "  ".join("-" * w for w in WIDTHS)])


def row_line(row):
    """One row of the table, fixed widths (so rows can be printed as they finish)."""
    if row["status"] is not None:
        cells = (row["mode"], f"n/a ({row['status']})", "", str(row["seeds"]), "")
    else:
        is_ref = row["mode"] == REFERENCE_MODE
        cells = (row["mode"], _interval(row, "final"), "-" if is_ref else _interval(row, "vs_torch", True),
                 str(row["seeds"]), f"{row['ms_per_step']:.1f} ms")
    return "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(cells, WIDTHS))).rstrip()


class SeedsResult:
    """Rows of ``train_seeds`` (one per mode) and the setup (``meta``)."""

    kind = "train_seeds"

    def __init__(self, rows, meta):
        self.rows, self.meta = rows, meta

    def table(self, width=None):
        return "\n".join(header_lines(self.meta, width) + [row_line(r) for r in self.rows])
