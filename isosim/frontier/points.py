"""From a records table to the points the frontier analysis fits: input checks, budget grids
and record-breaking points (see :mod:`isosim.frontier.analysis`)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from isosim.errors import IsosimError
from isosim.records import REACH_RTOL, normalize


# ----------------------------------------------------------------------------------------------
# Input checks
# ----------------------------------------------------------------------------------------------
def prepare(df: pd.DataFrame, metric: str, x: str = "rollouts") -> pd.DataFrame:
    """Normalise a records table and keep the rows where ``metric`` and ``x`` are known."""
    if df is None or len(df) == 0:
        raise IsosimError("the records table is empty")
    data = normalize(df, source="records")
    for col, what in ((metric, "metric"), (x, "compute")):
        if col not in data.columns:
            raise IsosimError(f"unknown {what} column {col!r}")
    for col in (metric, x):
        data[col] = pd.to_numeric(data[col], errors="coerce")
        if not np.isfinite(data[col]).any():
            raise IsosimError(f"column {col!r} has no finite values")
    data = data[np.isfinite(data[metric]) & np.isfinite(data[x])]
    if len(data) == 0:
        raise IsosimError(f"no row has both {metric!r} and {x!r}")
    return data.reset_index(drop=True)


def step_slack(data: pd.DataFrame, x: str) -> float:
    """The largest update step (b_p * n) of the data when ``x`` is rollouts (else 0): how far past the
    furthest x a budget may lie and still be reached by a run that stopped a step short."""
    if x != "rollouts" or not {"n", "b_p"} <= set(data.columns):
        return 0.0
    cost = pd.to_numeric(data["n"], errors="coerce") * pd.to_numeric(data["b_p"], errors="coerce")
    return float(cost.max()) if cost.notna().any() else 0.0


def metric_scale(values: np.ndarray) -> float:
    """The range a metric is read on: 1 for a share in [0, 1], 100 for a percentage in [0, 100],
    else the spread of the values (a score of another unit); tolerances in units of a share are
    multiplied by it."""
    v = np.asarray(values, dtype=float)
    v = v[np.isfinite(v)]
    if not len(v) or (v.min() >= -0.01 and v.max() <= 1.01):
        return 1.0
    if v.min() >= -1.0 and v.max() <= 101.0:
        return 100.0
    return float(np.ptp(v)) or 1.0


def default_budgets(xs: np.ndarray, n_budgets: int) -> np.ndarray:
    """``n_budgets`` log-spaced budgets from the smallest positive to the largest ``x``."""
    pos = xs[xs > 0]
    if len(pos) == 0:
        raise IsosimError("no positive compute values: every row is at zero rollouts")
    lo, hi = float(pos.min()), float(pos.max())
    if n_budgets < 1:
        raise IsosimError(f"n_budgets must be >= 1, got {n_budgets}")
    if lo == hi or n_budgets == 1:
        return np.array([hi])
    grid = np.geomspace(lo, hi, n_budgets)
    grid[0], grid[-1] = lo, hi  # exact endpoints, so the largest budget is reached exactly
    return grid


def check_budgets(budgets: Sequence[float] | np.ndarray, xs: np.ndarray, slack: float = 0.0) -> np.ndarray:
    """Budgets as a sorted float array, each inside the positive range of ``x`` (up to ``slack`` past
    its top: one update step, since runs stop at whole steps short of the budget they were planned for)."""
    b = np.sort(np.asarray(budgets, dtype=float).ravel())
    if len(b) == 0:
        raise IsosimError("the budget list is empty")
    pos = xs[xs > 0]
    if len(pos) == 0:
        raise IsosimError("no positive compute values: every row is at zero rollouts")
    lo, hi = float(pos.min()), float(pos.max())
    bad = b[~np.isfinite(b) | (b < lo * (1 - REACH_RTOL)) | (b > max(hi * (1 + REACH_RTOL), hi + slack))]
    if len(bad):
        raise IsosimError(f"budget {bad[0]:g} is outside the data (compute spans {lo:g} to {hi:g})")
    return b


# ----------------------------------------------------------------------------------------------
# 1. Record-breaking points
# ----------------------------------------------------------------------------------------------
def record_breaking(
    df: pd.DataFrame, metric: str = "val_avg", bin_width: float = 0.01, x: str = "rollouts"
) -> pd.DataFrame:
    """Rows of each run at which the bucketed ``metric`` beats every earlier row of that run.

    The bucket of a value is ``floor(value / bin_width)`` (with a 1e-9 guard against float
    round-off). The first row of each run (its step-0 row when present) is always kept. Rows are
    ordered by ``x`` within a run; the result keeps all columns, one row per record.
    """
    if not bin_width > 0:
        raise IsosimError(f"bin_width must be positive, got {bin_width}")
    data = prepare(df, metric, x).sort_values(["run_id", x, "step"], kind="stable")
    bucket = pd.Series(np.floor(data[metric].to_numpy() / bin_width + 1e-9), index=data.index)
    by_run = bucket.groupby(data["run_id"], sort=False)
    best_before = by_run.cummax().groupby(data["run_id"], sort=False).shift(1)
    keep = best_before.isna() | (bucket > best_before)
    return data[keep].reset_index(drop=True)
