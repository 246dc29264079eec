"""Ties and noise in a frontier: the tie band of ``n`` within a tolerance of the frontier, the
seed-to-seed noise of a sweep, and the budgets where anything was learned beyond it."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pandas as pd

from isosim.frontier.fits import (
    FitResult,
    RunPoints,
)

# ----------------------------------------------------------------------------------------------
# 5. analyze: frontier + n* fit + bootstrap over runs
# ----------------------------------------------------------------------------------------------
DEFAULT_TOL = 0.005
"""Tie tolerance of ``analyze``: curves within half a point of the metric (0.005) of the frontier tie."""
LEARN_Z = 3.0
"""A budget is learning when some n's seed-mean gain over its own step-0 rows exceeds LEARN_Z
standard errors (the max over up to a dozen n is then rarely noise: P < ~1.5% per budget)."""
SAT_MARGIN_OCTAVES = 0.5
"""An n* fit whose upper level is within this many octaves of the largest n tried is not saturated."""


def tie_band(rewards: np.ndarray, n_values: Sequence[int], reward: np.ndarray,
             tol: float) -> tuple[np.ndarray, np.ndarray]:
    """(smallest, largest) n whose fitted reward is within ``tol`` of the frontier, per budget.

    ``rewards`` is (n x budget) with NaN where an n does not compete; ``reward`` the frontier.
    Budgets where no n competes give NaN.
    """
    ok = np.isfinite(rewards) & (rewards >= np.asarray(reward)[None, :] - tol - 1e-12)
    nv = np.asarray(n_values, dtype=float)[:, None]
    any_ok = ok.any(axis=0)
    lo = np.where(any_ok, np.where(ok, nv, np.inf).min(axis=0), np.nan)
    hi = np.where(any_ok, np.where(ok, nv, -np.inf).max(axis=0), np.nan)
    return lo, hi


def seed_noise(data: pd.DataFrame, metric: str, x: str = "rollouts",
               fits: dict[int, FitResult] | None = None) -> tuple[float, str]:
    """Run-to-run noise of ``metric``: (standard deviation, how it was measured).

    ``"seeds"``: the pooled standard deviation over runs of the same (n, b_p) at the same step
    (x > 0), where some cell has two or more runs. Otherwise ``"residuals"``: the robust standard
    deviation (1.4826 x median absolute deviation) of every row around its n's fitted curve
    (``fits``); ``"none"`` (0.0) when neither is available.
    """
    pos = data[data[x] > 0]
    g = pos.groupby(["n", "b_p", "step"])[metric]
    cnt, var = g.count(), g.var(ddof=1)
    ok = cnt >= 2
    if ok.any():
        dof = (cnt[ok] - 1).to_numpy(float)
        return float(math.sqrt(np.sum(dof * var[ok].to_numpy(float)) / dof.sum())), "seeds"
    if fits:
        res = np.concatenate([
            gr[metric].to_numpy(float) - fits[int(n)].predict(gr[x].to_numpy(float))
            for n, gr in pos.groupby("n") if int(n) in fits] or [np.zeros(0)])
        if len(res):
            return float(1.4826 * np.median(np.abs(res - np.median(res)))), "residuals"
    return 0.0, "none"


def learning_budgets(data: pd.DataFrame, metric: str, x: str, budgets: np.ndarray, noise: float,
                     runs: RunPoints) -> tuple[np.ndarray, float | None]:
    """(learning per budget, base reward); all True and None when the data have no step-0 rows.

    Read on the raw rows, not on the fitted frontier (record-breaking fits sit on the upper tail
    of the noise): each run's metric is interpolated at every budget it reached and its own
    step-0 value subtracted; a budget is learning when, for some competing n, the mean of that
    gain over its runs exceeds ``LEARN_Z`` x ``noise`` x sqrt(2 / runs).
    """
    start = data[data[x] == 0]
    if len(start) == 0:
        return np.ones(len(budgets), bool), None
    base = float(start[metric].mean())
    first = start.groupby("run_id")[metric].mean()
    learning = np.zeros(len(budgets), bool)
    for n, ids in runs.groups.items():
        gains = []
        for rid, g in data[data["run_id"].astype(str).isin(ids)].groupby("run_id"):
            if rid not in first.index:
                continue
            g = g.sort_values(x)
            xv, yv = g[x].to_numpy(float), g[metric].to_numpy(float)
            v = np.interp(budgets, xv, yv) - float(first[rid])
            v[~runs.reaches(str(rid), budgets)] = np.nan  # stopped more than one step short, or a step costs more
            gains.append(v)
        if not gains:
            continue
        gains = np.asarray(gains)
        k = np.isfinite(gains).sum(axis=0)
        with np.errstate(invalid="ignore"):
            mean = np.nanmean(np.where(k > 0, gains, 0.0), axis=0)
        learning |= (k > 0) & (mean > LEARN_Z * noise * np.sqrt(2.0 / np.maximum(k, 1)))
    return learning, base
