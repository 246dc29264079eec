"""The fidelity harness's scales, its cached simulation runner and the reads every finding
shares (a run's metric at a budget, n* on a budget grid, per-seed repeats); the findings
themselves are scored in :mod:`isosim.predict.fidelity`, which names all of these too."""

from __future__ import annotations

import functools
from dataclasses import dataclass, replace
from typing import Any, Sequence

import numpy as np
import pandas as pd

from isosim.sim.config import SimConfig
from isosim.sim.presets import get_preset


# ----------------------------------------------------------------------------------------------
# Scales
# ----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Scale:
    """Size of the sweeps a score runs: problems, batch, budget, grid of n, seeds."""

    n_train: int = 128
    """training problems"""
    n_val: int = 256
    """validation problems"""
    b_p: int = 16
    """problems per batch of the Q1 sweeps"""
    budget: float = 3e5
    """top budget in rollouts"""
    n_values: tuple[int, ...] = (4, 8, 16, 32, 64, 128, 256)
    """rollouts per problem of the Q1 sweeps"""
    seeds: tuple[int, ...] = (0, 1)
    """seeds (runs per cell); data seed = run seed"""
    n_grid: int = 9
    """budgets of the empirical n*(C) read (log-spaced up to ``budget``)"""


QUICK = Scale()
"""CI scale: seconds per sweep on one CPU core"""
TEST = Scale(n_train=128, n_val=256, b_p=64, budget=4e6, n_values=(8, 32, 128, 512))
"""test scale of F1-F3: few steps (B_p 64, n >= 8) but enough distance for the hard set to move
(QUICK's 3e5 rollouts leave the hard preset's curve flat); about 20 s per sweep on one core (2026-12-02)"""
MEDIUM = Scale(n_train=256, n_val=256, b_p=16, budget=2e6, n_values=(4, 8, 16, 32, 64, 128, 256, 512))
"""tuning scale: a minute or two per sweep"""
FULL = Scale(n_train=512, n_val=512, b_p=32, budget=1e7,
             n_values=(4, 8, 16, 32, 64, 128, 256, 512, 1024), seeds=(0, 1, 2))
"""the studies' full scale (FIDELITY.md's setting)"""


def with_seeds(scale: Scale, seeds: Sequence[int]) -> Scale:
    """The same scale on other seeds (held-out checks)."""
    return replace(scale, seeds=tuple(int(s) for s in seeds))


# ----------------------------------------------------------------------------------------------
# Running
# ----------------------------------------------------------------------------------------------
def _freeze(d: dict) -> tuple:
    return tuple(sorted(d.items()))


@functools.lru_cache(maxsize=64)
def _run_cached(frozen: tuple[tuple, ...]) -> pd.DataFrame:
    from isosim.sim.engine import simulate

    return simulate([SimConfig(**dict(f)) for f in frozen])


def run(configs: Sequence[dict]) -> pd.DataFrame:
    """Simulate a list of SimConfig field dicts (cached on their values; do not mutate the result)."""
    frozen = tuple(_freeze(c) for c in configs)
    return _run_cached(frozen)


def settings(preset: str | dict, **overrides: Any) -> dict:
    """SimConfig fields of a preset name (or a dict of fields) with overrides applied."""
    base = get_preset(preset) if isinstance(preset, str) else dict(preset)
    base.update(overrides)
    return base


def q1_configs(preset: str | dict, scale: Scale = QUICK, **overrides: Any) -> list[dict]:
    """The Q1 sweep of a setting: every n of the scale x every seed, each run to the top budget."""
    base = settings(preset, n_train=scale.n_train, n_val=scale.n_val, b_p=scale.b_p, **overrides)
    return [dict(base, n=n, budget=float(scale.budget), seed=s)
            for n in scale.n_values for s in scale.seeds]


def run_q1(preset: str | dict, scale: Scale = QUICK, **overrides: Any) -> pd.DataFrame:
    """Records of the Q1 sweep of a setting (see :func:`q1_configs`)."""
    return run(q1_configs(preset, scale, **overrides))


# ----------------------------------------------------------------------------------------------
# Reading a records table
# ----------------------------------------------------------------------------------------------
def values_at(df: pd.DataFrame, budget: float, metric: str = "val_avg", by: str = "n",
              x: str = "rollouts") -> pd.DataFrame:
    """Each run's ``metric`` at ``budget`` (linear in ``x``); runs that stopped more than one step
    short are left out (a run planned for the budget ends up to one step below it).

    Returns columns ``run_id``, ``by``, ``seed``, ``value``.
    """
    rows = []
    for rid, g in df.groupby("run_id", sort=False):
        xv, yv = g[x].to_numpy(float), g[metric].to_numpy(float)
        step_cost = float(g["b_p"].iat[0] * g["n"].iat[0]) if x == "rollouts" else 1.0
        if xv.max() < budget * 0.99 and budget - xv.max() >= step_cost:
            continue  # stopped more than one step short of the budget
        rows.append({"run_id": rid, by: g[by].iat[0], "seed": int(g["seed"].iat[0]),
                     "value": float(np.interp(budget, xv, yv))})
    return pd.DataFrame(rows, columns=["run_id", by, "seed", "value"])


def curve_at(df: pd.DataFrame, budget: float, metric: str = "val_avg") -> dict[int, float]:
    """Seed-mean ``metric`` per n at ``budget``."""
    v = values_at(df, budget, metric)
    return {int(n): float(val) for n, val in v.groupby("n")["value"].mean().items()}


def argmax_n(curve: dict[int, float]) -> int:
    """The n of the largest value (the smallest such n on ties)."""
    best = max(curve.values())
    return min(n for n, v in curve.items() if v == best)


def n_star_curve(df: pd.DataFrame, budgets: Sequence[float], metric: str = "val_avg") -> list[int | None]:
    """Empirical n*(C): argmax over n of the seed-mean metric at each budget (None: no run reached)."""
    out = []
    for b in budgets:
        c = curve_at(df, b, metric)
        out.append(argmax_n(c) if c else None)
    return out


def budget_grid(df: pd.DataFrame, top: float, n_grid: int) -> np.ndarray:
    """Log-spaced budgets from the first budget at which every run has stepped (at least top/1000) to ``top``."""
    first = df[df["step"] > 0].groupby("run_id")["rollouts"].min().max()  # every run has stepped
    return np.geomspace(max(first, top / 1e3), top, n_grid)


def per_seed(df: pd.DataFrame, fn) -> dict[int, Any]:
    """``fn`` applied to each seed's runs alone."""
    return {int(s): fn(g) for s, g in df.groupby("seed")}
