"""Side analyses of a sweep: ``B_p`` vs ``n`` spread (:func:`bp_sensitivity`), ``n*(M)`` at a
fixed total batch (:func:`q2_split`) and interference (:func:`hist_at_matched_compute`); the
fourth, :func:`isosim.frontier.analysis.metric_split`, runs the full analysis per metric."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from isosim.errors import IsosimError
from isosim.files import jsonable
from isosim.frontier.envelope import frontier
from isosim.frontier.points import (
    REACH_RTOL,
    prepare,
)
from isosim.records import HIST_COLUMNS


def _run_value_at(data: pd.DataFrame, metric: str, x: str, budget: float) -> pd.DataFrame:
    """Each run's metric linearly interpolated in ``x`` at ``budget`` (runs that reached it)."""
    rows = []
    for rid, g in data.groupby("run_id", sort=True):
        xv, yv = g[x].to_numpy(float), g[metric].to_numpy(float)
        if xv.max() < budget * (1 - REACH_RTOL):
            continue
        rows.append({"run_id": rid, "n": int(g["n"].iat[0]), "b_p": int(g["b_p"].iat[0]),
                     "value": float(np.interp(budget, xv, yv))})
    return pd.DataFrame(rows, columns=["run_id", "n", "b_p", "value"])


def bp_sensitivity(
    df: pd.DataFrame, metric: str = "val_avg", budget: float | None = None, *, x: str = "rollouts"
) -> dict[str, Any]:
    """Spread of reward over b_p at fixed n vs over n at fixed b_p, at one budget (PAPER F5).

    Each run's metric is interpolated (linearly in ``x``) at ``budget`` and averaged over seeds
    per (n, b_p) cell. ``spread_over_b_p_pp`` is the mean over n of (max - min over b_p), and
    ``spread_over_n_pp`` the mean over b_p of (max - min over n), in percentage points (x100),
    counting only rows/columns with two or more cells. Default budget: the largest one that every
    run of every cell reached.
    """
    data = prepare(df, metric, x)
    run_reach = data.groupby("run_id")[x].max()
    if budget is None:
        budget = float(run_reach.min())
        if budget <= 0:
            raise IsosimError("some run never went past zero compute; give a budget")
    elif not (0 < budget <= run_reach.max() * (1 + REACH_RTOL)):
        raise IsosimError(f"budget {budget:g} is outside the data (compute up to {run_reach.max():g})")
    vals = _run_value_at(data, metric, x, float(budget))
    all_cells = data.groupby(["n", "b_p"]).size().index
    cells = vals.groupby(["n", "b_p"])["value"].agg(["mean", "size"]).reset_index()
    if len(cells) < len(all_cells):
        short = len(all_cells) - len(cells)
        raise IsosimError(f"budget {budget:g} is beyond the reach of {short} (n, b_p) cell(s)")
    table = cells.pivot(index="n", columns="b_p", values="mean")
    over_bp = (table.max(axis=1) - table.min(axis=1))[table.notna().sum(axis=1) >= 2] * 100
    over_n = (table.max(axis=0) - table.min(axis=0))[table.notna().sum(axis=0) >= 2] * 100
    if len(over_bp) == 0 or len(over_n) == 0:
        raise IsosimError("bp_sensitivity needs two or more b_p at some n and two or more n at some b_p")
    return jsonable({
        "metric": metric,
        "budget": float(budget),
        "spread_over_b_p_pp": float(over_bp.mean()),
        "spread_over_n_pp": float(over_n.mean()),
        "per_n_spread_pp": {int(k): float(v) for k, v in over_bp.items()},
        "per_b_p_spread_pp": {int(k): float(v) for k, v in over_n.items()},
        "cells": [
            {"n": int(r.n), "b_p": int(r.b_p), "reward": float(r["mean"]), "n_seeds": int(r["size"])}
            for _, r in cells.iterrows()
        ],
    })


def q2_split(
    df: pd.DataFrame,
    metric: str = "val_avg",
    total_batch: int | None = None,
    steps: Sequence[float] | np.ndarray | None = None,
    **kwargs: Any,
) -> pd.DataFrame:
    """n*(M) and B_p*(M) at a fixed rollout batch B = b_p * n (PAPER F4).

    Keeps the runs with ``b_p * n == total_batch`` (default: the B shared by the most distinct
    n), fits each n's metric against update steps and reads the frontier over n at each M in
    ``steps`` (default: 25 log-spaced step counts). Returns columns ``step``, ``rollouts``
    (B * M), ``n_star``, ``b_p_star``, ``reward``. ``kwargs`` go to ``frontier``.
    """
    data = prepare(df, metric, "step")
    batch = data["b_p"] * data["n"]
    if total_batch is None:
        counts = data.assign(B=batch).groupby("B")["n"].nunique()
        total_batch = int(counts[counts == counts.max()].index.max())
    sub = data[batch == total_batch]
    if sub["n"].nunique() < 2:
        raise IsosimError(f"q2_split needs runs of two or more n at total batch {total_batch}")
    fr = frontier(sub, metric, steps, x="step", **kwargs)
    return pd.DataFrame({
        "step": fr.budgets,
        "rollouts": fr.budgets * total_batch,
        "n_star": fr.n_star,
        "b_p_star": total_batch // fr.n_star,
        "reward": fr.reward,
    })


def hist_at_matched_compute(
    df: pd.DataFrame, n_values: Sequence[int], budget: float, *, x: str = "rollouts"
) -> pd.DataFrame:
    """Training pass@1 histograms (``train_hist_*``) of each run of the given n near a budget.

    For every run of each n, the row whose ``x`` is closest to ``budget``; the budget must lie
    within the range of ``x`` that n's runs covered. Returns ``run_id``, ``n``, ``b_p``, ``seed``,
    ``step``, ``x`` and the histogram columns, one row per run.
    """
    if df is not None and len(df) and any(c not in df.columns for c in HIST_COLUMNS):
        raise IsosimError("the table has no pass@1 histogram (columns train_hist_0..9)")
    data = prepare(df, HIST_COLUMNS[0], x)
    if not n_values:
        raise IsosimError("hist_at_matched_compute needs at least one n")
    rows = []
    for n in n_values:
        runs = data[data["n"] == int(n)]
        if len(runs) == 0:
            have = sorted(int(v) for v in data["n"].unique())
            raise IsosimError(f"no run with n = {n} (the table has n = {have})")
        lo, hi = runs[x].min(), runs[x].max()
        if not lo <= budget <= hi * (1 + REACH_RTOL):
            raise IsosimError(f"budget {budget:g} is outside the data for n = {n} ({lo:g} to {hi:g})")
        for _, g in runs.groupby("run_id", sort=True):
            rows.append(g.loc[(g[x] - budget).abs().idxmin()])
    cols = ["run_id", "n", "b_p", "seed", "step", x, *HIST_COLUMNS]
    return pd.DataFrame(rows)[list(dict.fromkeys(cols))].reset_index(drop=True)
