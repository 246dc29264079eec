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
    step_slack,
)


# ----------------------------------------------------------------------------------------------
# 3. Frontier
# ----------------------------------------------------------------------------------------------
READINGS = ("best", "final")
"""What caps each n's fitted curve at a budget C: ``best`` its runs' best evaluation up to C (seed
mean), ``final`` their last evaluation up to C (seed mean)."""


@dataclass(frozen=True)
class Frontier:
    """Upper envelope over ``n`` of the capped fitted curves on a budget grid."""

    budgets: np.ndarray
    """Budgets (units of ``x``), ascending."""
    n_star: np.ndarray
    """The ``n`` whose capped curve is highest at each budget (ties: the smaller n)."""
    reward: np.ndarray
    """Frontier reward at each budget."""
    n_values: tuple[int, ...]
    """All ``n`` in the data, ascending."""
    rewards: np.ndarray
    """Capped fitted reward per (n, budget): min(sigmoid, measured); NaN where that n does not compete."""
    fits: dict[int, FitResult]
    """The per-n fits (the sigmoid on record-breaking points, uncapped)."""
    span: dict[int, tuple[float, float]]
    """Budgets each n competes on: (cost of one update step, furthest x reached)."""
    measured: np.ndarray | None = None
    """Measured reward per (n, budget) in ``reading`` (seed mean), the cap; NaN where it does not compete."""
    reading: str = "best"
    """``best`` or ``final`` (``READINGS``)."""


def measured_caps(runs: RunPoints, budgets: np.ndarray, reading: str = "best",
                  groups: dict[int, list[str]] | None = None) -> dict[int, np.ndarray]:
    """Each n's measured value per budget (seed mean over its runs, ``groups`` or ``runs.groups``),
    in ``reading``: the cap of its fitted curve, and NaN where it does not compete (no run of it
    reached the budget within one step, or one step of it costs more)."""
    if reading not in READINGS:
        raise IsosimError(f"reading must be one of {', '.join(READINGS)}, got {reading!r}")
    groups = runs.groups if groups is None else groups
    return {n: runs.measured(ids, budgets, reading) for n, ids in groups.items()}


def upper_envelope(
    fits: dict[int, FitResult], span: dict[int, tuple[float, float]], budgets: np.ndarray,
    caps: dict[int, np.ndarray] | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(rewards per n x budget, n_star, reward); NaN where no n competes at a budget.

    With ``caps`` (:func:`measured_caps`), each n's fitted curve is read as min(fit, cap) and
    competes where its cap is finite: the frontier is never above what some n measured. Without,
    the uncapped fit competes where ``span`` reaches (within ``REACH_RTOL``)."""
    n_values = sorted(fits)
    rewards = np.full((len(n_values), len(budgets)), np.nan)
    for i, n in enumerate(n_values):
        if caps is not None:
            cap = np.asarray(caps[n], dtype=float)
            ok = np.isfinite(cap)
            rewards[i, ok] = np.minimum(fits[n].predict(budgets[ok]), cap[ok])
            continue
        lo, hi = span[n]
        ok = (lo <= budgets * (1 + REACH_RTOL)) & (hi >= budgets * (1 - REACH_RTOL))
        rewards[i, ok] = fits[n].predict(budgets[ok])
    any_ok = np.isfinite(rewards).any(axis=0)
    idx = np.argmax(np.where(np.isfinite(rewards), rewards, -np.inf), axis=0)
    n_star = np.where(any_ok, np.asarray(n_values, dtype=float)[idx], np.nan)
    reward = np.where(any_ok, rewards[idx, np.arange(len(budgets))], np.nan)
    return rewards, n_star, reward


def point_frontier(
    runs: RunPoints, grid: np.ndarray, f_scale: float | None, reading: str | None = "best",
) -> tuple[dict[int, FitResult], dict[int, tuple[float, float]], np.ndarray, np.ndarray, np.ndarray]:
    """(fits, span, rewards, n_star, reward) of the point estimate; ``reading`` None: uncapped
    (the sigmoids alone, as before the cap; for comparison only)."""
    fits = {n: runs.fit(n, ids, f_scale) for n, ids in runs.groups.items()}
    span = {n: runs.span(ids) for n, ids in runs.groups.items()}
    caps = None if reading is None else measured_caps(runs, grid, reading)
    rewards, n_star, reward = upper_envelope(fits, span, grid, caps)
    if not np.isfinite(n_star).all():
        bad = grid[~np.isfinite(n_star)][0]
        raise IsosimError(f"no n can spend budget {bad:g}: one update step of every n costs more, "
                          "or no run has an evaluation at or below it")
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
    reading: str = "best",
) -> Frontier:
    """Compute-optimal frontier: at each budget, the ``n`` whose capped fitted curve is highest.

    Each n's sigmoid (fitted on record-breaking points) is read as min(sigmoid, measured), the
    measured value being the seed mean of its runs' best evaluation up to the budget (``reading``
    ``best``) or last evaluation up to it (``final``): a fit may smooth the measurements, never
    read above them. Default budgets: ``n_budgets`` log-spaced values from the smallest positive to
    the largest ``x`` in the data; given budgets must lie in that range. No extrapolation: an n
    competes at a budget C only if one of its runs stopped at most one update step short of C
    (runs stop at whole steps) or within ``REACH_RTOL``, and, when ``x`` is rollouts, one update
    step of it (b_p * n) fits in C.
    """
    data = prepare(df, metric, x)
    xs = data[x].to_numpy(float)
    grid = default_budgets(xs, n_budgets) if budgets is None else check_budgets(budgets, xs, step_slack(data, x))
    runs = collect_runs(data, metric, x, ("n",), use_record_breaking, bin_width)
    fits, span, rewards, n_star, reward = point_frontier(runs, grid, f_scale, reading)
    caps = measured_caps(runs, grid, reading)
    measured = np.array([caps[n] for n in sorted(fits)])
    return Frontier(grid, n_star.astype(int), reward, tuple(sorted(fits)), rewards, fits, span, measured, reading)
