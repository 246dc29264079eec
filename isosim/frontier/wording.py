"""How the frontier's numbers are worded for people: budgets in two significant digits, whether
an interval of n says anything about the grid it was read on, and a prediction entry as lines."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np


def short_budget(c: float) -> str:
    """A budget in two significant digits, without ``e+0``: 2e5, 1.5e6, 500; ``~`` where rounded
    (199,680 -> ``~2e5``)."""
    c = float(c)
    if c <= 0 or not np.isfinite(c):
        return f"{c:g}"
    exp = int(np.floor(np.log10(c)))
    mant = round(c / 10.0**exp, 1)
    if mant >= 10:
        mant, exp = mant / 10, exp + 1
    text = (f"{mant:g}e{exp}" if exp >= 4 else f"{mant * 10.0**exp:g}")
    return text if np.isclose(mant * 10.0**exp, c, rtol=1e-9) else "~" + text


def spans_grid(interval: Sequence[float] | None, n_values: Sequence[float] | None) -> bool:
    """Whether an interval of n ([lo, hi]) covers the whole grid of n tried: it then carries no
    information (any n of the grid is inside it)."""
    if not interval or not n_values:
        return False
    lo, hi = float(interval[0]), float(interval[1])
    return lo <= min(n_values) * 1.01 and hi >= max(n_values) * 0.99


def prediction_lines(entry: dict[str, Any]) -> list[str]:
    """A prediction entry as lines: n* at the top budget and its tie band, n_sat and its interval,
    each said plainly to carry no information where it spans the whole grid of n."""
    grid = [int(n) for n in entry.get("n_values") or []]
    grid_txt = f"n = {min(grid)}-{max(grid)}" if grid else "the grid"
    top = float(entry["budgets"][-1])
    lo, hi = int(entry["n_tol"][-1]), int(entry["n_tie_hi"][-1])
    band = f"{lo}" if lo == hi else f"{lo}-{hi}"
    line = (f"n* at C = {short_budget(top)} (the largest of {len(entry['budgets'])} budgets): {entry['n_star'][-1]} "
            f"(n within the tie tolerance: {band}")
    line += f"; it spans the whole grid {grid_txt}: no information on n*)" if spans_grid((lo, hi), grid) else ")"
    if not (entry.get("learning") or [True])[-1]:
        line += "; no learning beyond the seed noise at C"
    lines = [line]
    if entry.get("n_sat") is None:
        lines.append(f"n_sat: none ({entry.get('n_sat_reason') or 'no budget shows learning beyond the seed noise'})")
    else:
        ci = entry.get("n_sat_ci")
        txt = f"n_sat: {entry['n_sat']:.1f}"
        if ci:
            txt += f" (interval {ci[0]:.1f}-{ci[1]:.1f}" + (
                f": it spans the whole grid {grid_txt}, so it carries no information on n_sat)"
                if spans_grid(ci, grid) else ")")
        if entry.get("at_floor"):
            txt += "; the fit sits at the smallest n read: n_sat may lie lower"
        elif entry.get("saturated") is False:
            txt += "; not saturated: the fit reaches the largest n read"
        lines.append(txt)
    return lines
