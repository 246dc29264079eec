"""How the frontier's numbers are worded for people: budgets in two significant digits, and
whether an interval of n says anything about the grid it was read on."""

from __future__ import annotations

from collections.abc import Sequence

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
