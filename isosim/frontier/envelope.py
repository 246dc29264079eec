"""The frontier: the upper envelope over ``n`` of the fitted curves on a budget grid, and the
``n`` that attains it, ``n*(C)`` (see :mod:`isosim.frontier.analysis`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from isosim.errors import IsosimError
from isosim.frontier.fits import (
    FitResult,
    RunPoints,
    collect_runs,
)
from isosim.frontier.points import (
    REACH_RTOL,
    check_budgets,
    default_budgets,
    prepare,
)


# ----------------------------------------------------------------------------------------------
# 3. Frontier
# ----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Frontier:
    """Upper envelope over ``n`` of the fitted curves on a budget grid."""

    budgets: np.ndarray
    """Budgets (units of ``x``), ascending."""
    n_star: np.ndarray
    """The ``n`` whose curve is highest at each budget (ties: the smaller n)."""
    reward: np.ndarray
    """Frontier reward at each budget."""
    n_values: tuple[int, ...]
    """All ``n`` in the data, ascending."""
    rewards: np.ndarray
    """Fitted reward per (n, budget); NaN where that n does not compete (see ``frontier``)."""
    fits: dict[int, FitResult]
    """The per-n fits."""
    span: dict[int, tuple[float, float]]
    """Budgets each n competes on: (cost of one update step, furthest x reached)."""


def upper_envelope(
    fits: dict[int, FitResult], span: dict[int, tuple[float, float]], budgets: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(rewards per n x budget, n_star, reward); NaN where no n competes at a budget."""
    n_values = sorted(fits)
    rewards = np.full((len(n_values), len(budgets)), np.nan)
    for i, n in enumerate(n_values):
        lo, hi = span[n]
        ok = (lo <= budgets * (1 + REACH_RTOL)) & (hi >= budgets * (1 - REACH_RTOL))
        rewards[i, ok] = fits[n].predict(budgets[ok])
    any_ok = np.isfinite(rewards).any(axis=0)
    idx = np.argmax(np.where(np.isfinite(rewards), rewards, -np.inf), axis=0)
    n_star = np.where(any_ok, np.asarray(n_values, dtype=float)[idx], np.nan)
    reward = np.where(any_ok, rewards[idx, np.arange(len(budgets))], np.nan)
    return rewards, n_star, reward


def point_frontier(
    runs: RunPoints, grid: np.ndarray, f_scale: float | None
) -> tuple[dict[int, FitResult], dict[int, tuple[float, float]], np.ndarray, np.ndarray, np.ndarray]:
    fits = {n: runs.fit(n, ids, f_scale) for n, ids in runs.groups.items()}
    span = {n: runs.span(ids) for n, ids in runs.groups.items()}
    rewards, n_star, reward = upper_envelope(fits, span, grid)
    if not np.isfinite(n_star).all():
        bad = grid[~np.isfinite(n_star)][0]
        raise IsosimError(f"no n can spend budget {bad:g}: one update step of every n costs more")
    return fits, span, rewards, n_star, reward


def frontier(
    df: pd.DataFrame,
    metric: str = "val_avg",
    budgets: Sequence[float] | np.ndarray | None = None,
    *,
    x: str = "rollouts",
    use_record_breaking: bool = True,
    bin_width: float = 0.01,
    n_budgets: int = 25,
    f_scale: float | None = None,
) -> Frontier:
    """Compute-optimal frontier: at each budget, the ``n`` whose fitted curve is highest.

    Default budgets: ``n_budgets`` log-spaced values from the smallest positive to the largest
    ``x`` in the data; given budgets must lie in that range. No extrapolation: an n competes at
    a budget C only if one of its runs reached C (within ``REACH_RTOL`` = 1%, since runs stop
    at whole steps) and, when ``x`` is rollouts, one update step of it (b_p * n) fits in C.
    """
    data = prepare(df, metric, x)
    xs = data[x].to_numpy(float)
    grid = default_budgets(xs, n_budgets) if budgets is None else check_budgets(budgets, xs)
    runs = collect_runs(data, metric, x, ("n",), use_record_breaking, bin_width)
    fits, span, rewards, n_star, reward = point_frontier(runs, grid, f_scale)
    return Frontier(grid, n_star.astype(int), reward, tuple(sorted(fits)), rewards, fits, span)
