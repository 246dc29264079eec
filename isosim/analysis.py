"""Frontier analysis: from a records table to the compute-optimal n*(C), the paper's way.

The workflow (PAPER.md, "How they read a sweep"), one function per move:

1. ``record_breaking``  keep the points where a run's bucketed metric sets a new record.
2. ``fit_saturating``   monotone sigmoid in log compute, R(C) = R0 + (A - R0) / (1 + (C_mid / C)^B),
                        fitted per ``n`` on the record-breaking points of all its seeds (``fit_per_n``).
3. ``frontier``         upper envelope over ``n`` of the fitted curves on a budget grid; ``n*(C)``
                        is the ``n`` that attains it. A curve is only read where its runs reached.
4. ``fit_n_star``       log2 n*(C) as a sigmoid of log10 C; its upper level gives ``n_sat``.
5. ``analyze``          all of the above plus a bootstrap over runs (seeds) within each ``n``;
                        returns the JSON-ready result that ``write_frontier_json`` stores.

Side analyses: ``metric_split`` (coverage vs sharpening), ``bp_sensitivity`` (B_p vs n spread),
``q2_split`` (n*(M) at a fixed total batch), ``hist_at_matched_compute`` (interference).

Every function reads a records table (``isosim.records``) and raises ``IsosimError`` with one
sentence on bad input. Only numpy, scipy and pandas are imported.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import pandas as pd
from scipy.optimize import least_squares
from scipy.special import expit

from isosim.errors import IsosimError
from isosim.files import jsonable, write_json  # noqa: F401  (jsonable: public here too)
from isosim.records import HIST_COLUMNS, normalize

LN10 = math.log(10.0)
REACH_RTOL = 0.01  # a run "reached" a budget if its last x >= budget * (1 - REACH_RTOL):
# runs stop at whole steps, so a run planned for C often ends a fraction of a step short.


# ----------------------------------------------------------------------------------------------
# Input checks
# ----------------------------------------------------------------------------------------------
def _prepare(df: pd.DataFrame, metric: str, x: str = "rollouts") -> pd.DataFrame:
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


def _default_budgets(xs: np.ndarray, n_budgets: int) -> np.ndarray:
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


def _check_budgets(budgets: Sequence[float] | np.ndarray, xs: np.ndarray) -> np.ndarray:
    """Budgets as a sorted float array, each inside the positive range of ``x``."""
    b = np.sort(np.asarray(budgets, dtype=float).ravel())
    if len(b) == 0:
        raise IsosimError("the budget list is empty")
    pos = xs[xs > 0]
    if len(pos) == 0:
        raise IsosimError("no positive compute values: every row is at zero rollouts")
    lo, hi = float(pos.min()), float(pos.max())
    bad = b[~np.isfinite(b) | (b < lo * (1 - REACH_RTOL)) | (b > hi * (1 + REACH_RTOL))]
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
    data = _prepare(df, metric, x).sort_values(["run_id", x, "step"], kind="stable")
    bucket = pd.Series(np.floor(data[metric].to_numpy() / bin_width + 1e-9), index=data.index)
    by_run = bucket.groupby(data["run_id"], sort=False)
    best_before = by_run.cummax().groupby(data["run_id"], sort=False).shift(1)
    keep = best_before.isna() | (bucket > best_before)
    return data[keep].reset_index(drop=True)


# ----------------------------------------------------------------------------------------------
# Shared core: robust fit of y = lo + (hi - lo) * expit(k * unit * (t - mid))
# ----------------------------------------------------------------------------------------------
def _sigmoid(theta: np.ndarray, t: np.ndarray, unit: float) -> np.ndarray:
    """lo + (hi - lo) * expit(k * unit * (t - mid)); t = -inf gives lo."""
    lo, hi, mid, k = theta
    return lo + (hi - lo) * expit(k * unit * (t - mid))


def _sigmoid_jac(theta: np.ndarray, t: np.ndarray, unit: float) -> np.ndarray:
    lo, hi, mid, k = theta
    finite = np.isfinite(t)
    d = np.where(finite, t - mid, 0.0)
    e = np.where(finite, expit(k * unit * d), 0.0)
    de = e * (1.0 - e) * (hi - lo) * unit
    return np.column_stack([1.0 - e, e, -k * de, d * de])


def _huber_cost(r: np.ndarray, f_scale: float) -> np.ndarray:
    """least_squares' cost for loss="huber": 0.5 f^2 sum rho((r / f)^2), over the last axis."""
    z = (r / f_scale) ** 2
    return 0.5 * f_scale**2 * np.where(z <= 1.0, z, 2.0 * np.sqrt(z) - 1.0).sum(axis=-1)


def _robust_sigmoid(
    t: np.ndarray,
    y: np.ndarray,
    lower: np.ndarray,
    upper: np.ndarray,
    *,
    unit: float,
    f_scale: float,
    starts: Sequence[Sequence[float]] = (),
    n_polish: int = 3,
    grid: tuple[int, int] = (41, 12),
) -> tuple[np.ndarray, float]:
    """Bounded Huber fit of (lo, hi, mid, k); returns (params, cost).

    Multi-start without waste: on a grid of (mid, k) the model is linear in (lo, hi), so the
    least-squares (lo, hi) of every grid cell comes in closed form, vectorised. The ``n_polish``
    cheapest cells (by Huber cost, with any extra ``starts``) are refined by least_squares.
    """
    mid_g, k_g = (a.ravel() for a in np.meshgrid(
        np.linspace(lower[2], upper[2], grid[0]), np.geomspace(lower[3], upper[3], grid[1])))
    e = expit(k_g[:, None] * unit * (t[None, :] - mid_g[:, None]))
    u = 1.0 - e
    a11, a12, a22 = (u * u).sum(1), (u * e).sum(1), (e * e).sum(1)
    b1, b2 = u @ y, e @ y
    det = a11 * a22 - a12**2
    ok = det > 1e-12 * np.maximum(a11 * a22, 1e-300)
    det = np.where(ok, det, 1.0)
    lo = np.where(ok, (a22 * b1 - a12 * b2) / det, y.mean())
    hi = np.where(ok, (a11 * b2 - a12 * b1) / det, y.mean())
    lo, hi = np.clip(lo, lower[0], upper[0]), np.clip(hi, lower[1], upper[1])
    cand = np.column_stack([lo, hi, mid_g, k_g])
    if len(starts):
        cand = np.vstack([cand, np.clip(np.asarray(starts, dtype=float), lower, upper)])
        e = expit(cand[:, 3:4] * unit * (t[None, :] - cand[:, 2:3]))
    cost = _huber_cost(cand[:, :1] + (cand[:, 1:2] - cand[:, :1]) * e - y, f_scale)
    margin = 1e-9 * (upper - lower)
    best = None
    for i in np.argsort(cost, kind="stable")[:n_polish]:
        res = least_squares(
            lambda th: _sigmoid(th, t, unit) - y, np.clip(cand[i], lower + margin, upper - margin),
            jac=lambda th: _sigmoid_jac(th, t, unit), bounds=(lower, upper),
            loss="huber", f_scale=f_scale,
        )
        if best is None or res.cost < best.cost:
            best = res
    return best.x, float(best.cost)


def _at_bound(theta: np.ndarray, lower: np.ndarray, upper: np.ndarray, names: Sequence[str]) -> tuple[str, ...]:
    """Names of the parameters within 1e-6 of the width of their range from a bound."""
    eps = 1e-6 * (upper - lower)
    return tuple(nm for nm, v, lo, hi, e in zip(names, theta, lower, upper, eps) if v <= lo + e or v >= hi - e)


# ----------------------------------------------------------------------------------------------
# 2. Saturating fit per n
# ----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class FitResult:
    """A fitted R(C) = R0 + (A - R0) / (1 + (C_mid / C)^B); ``flat`` marks a constant fit."""

    r0: float
    """Reward at zero compute."""
    a: float
    """Asymptotic reward."""
    log_c_mid: float
    """log10 of the compute at which half of the gain A - R0 is reached."""
    b: float
    """Steepness (> 0) in log compute."""
    loss: float
    """Mean robust (Huber) loss per point at the optimum; 0 for a flat fit."""
    n_points: int
    """Points the fit used."""
    flat: bool = False
    """True when the input was degenerate (constant y, fewer than 3 points): R(C) = r0."""
    at_bound: tuple[str, ...] = ()
    """Parameters (``r0``, ``a``, ``log_c_mid``, ``b``) that ended on a bound of the fit."""

    @property
    def c_mid(self) -> float:
        """Compute at the midpoint of the sigmoid."""
        return float(10.0**self.log_c_mid)

    @property
    def params(self) -> np.ndarray:
        """(r0, a, log_c_mid, b) as an array."""
        return np.array([self.r0, self.a, self.log_c_mid, self.b])

    def predict(self, c: float | np.ndarray) -> np.ndarray:
        """Fitted reward at compute ``c`` (scalar or array; C = 0 gives r0)."""
        c = np.asarray(c, dtype=float)
        with np.errstate(divide="ignore"):  # log10(0) = -inf is the intended limit
            lc = np.log10(c)
        return _sigmoid(self.params, lc, LN10)

    def to_dict(self) -> dict[str, Any]:
        """Plain-float parameters (with ``c_mid``) for JSON."""
        return {**asdict(self), "at_bound": list(self.at_bound), "c_mid": self.c_mid}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> FitResult:
        """Inverse of ``to_dict`` (extra keys such as ``max_rollouts`` are ignored)."""
        return cls(
            r0=float(d["r0"]), a=float(d["a"]), log_c_mid=float(d["log_c_mid"]), b=float(d["b"]),
            loss=float(d.get("loss", 0.0)), n_points=int(d.get("n_points", 0)),
            flat=bool(d.get("flat", False)),
        )


def fit_saturating(
    x: Sequence[float] | np.ndarray,
    y: Sequence[float] | np.ndarray,
    *,
    f_scale: float | None = None,
    starts: Sequence[Sequence[float]] = (),
    b_bounds: tuple[float, float] = (0.1, 10.0),
    n_polish: int = 3,
) -> FitResult:
    """Fit R(C) = R0 + (A - R0) / (1 + (C_mid / C)^B) to compute ``x`` and reward ``y``.

    Huber loss (``scipy.optimize.least_squares``), multi-start: a grid over (log10 C_mid, B)
    with R0, A solved in closed form per cell, the ``n_polish`` best cells (and any extra
    ``starts``, given as (r0, a, log10 c_mid, b)) refined. Bounds keep the fit plausible: with
    ``s`` the spread of ``y``, R0 in [min y - s, max y], A in [min y, max y + s], log10 C_mid
    within one decade of the positive ``x`` range, B in ``b_bounds``. A < R0 is allowed (a
    falling curve is still monotone); ``x = 0`` points pin R0. ``f_scale`` (the Huber threshold)
    defaults to 5% of the spread. Fewer than 3 points, fewer than two distinct ``x``, no positive
    ``x`` or a constant ``y`` give a flat fit at the mean of ``y``.
    """
    x = np.asarray(x, dtype=float).ravel()
    y = np.asarray(y, dtype=float).ravel()
    if x.shape != y.shape:
        raise IsosimError(f"x and y must have the same length, got {len(x)} and {len(y)}")
    ok = np.isfinite(x) & np.isfinite(y) & (x >= 0)
    x, y = x[ok], y[ok]
    if len(x) == 0:
        raise IsosimError("no finite, non-negative points to fit")
    pos = x[x > 0]
    lc_mid0 = float(np.median(np.log10(pos))) if len(pos) else 0.0
    y_lo, y_hi = float(y.min()), float(y.max())
    spread = y_hi - y_lo
    if len(x) < 3 or len(np.unique(x)) < 2 or len(pos) == 0 or spread <= 1e-12 * max(1.0, abs(y_hi)):
        return FitResult(float(y.mean()), float(y.mean()), lc_mid0, 1.0, 0.0, len(x), flat=True)

    with np.errstate(divide="ignore"):  # x = 0 -> log10 = -inf -> R0
        lc = np.log10(x)
    lc_lo, lc_hi = float(np.log10(pos.min())), float(np.log10(pos.max()))
    lower = np.array([y_lo - spread, y_lo, lc_lo - 1.0, b_bounds[0]])
    upper = np.array([y_hi, y_hi + spread, lc_hi + 1.0, b_bounds[1]])
    scale = f_scale if f_scale is not None else 0.05 * spread
    theta, cost = _robust_sigmoid(lc, y, lower, upper, unit=LN10, f_scale=scale,
                                  starts=starts, n_polish=n_polish)
    r0, a, lcm, b = (float(v) for v in theta)
    return FitResult(r0, a, lcm, b, cost / len(x), len(x),
                     at_bound=_at_bound(theta, lower, upper, ("r0", "a", "log_c_mid", "b")))


# ----------------------------------------------------------------------------------------------
# Points per run, fits per group (shared by fit_per_n, frontier, analyze)
# ----------------------------------------------------------------------------------------------
@dataclass
class _Runs:
    """Fit points per run, the runs of each group, and the compute range each run covers."""

    xy: dict[str, tuple[np.ndarray, np.ndarray]]
    groups: dict[Any, list[str]]
    reach: dict[str, float]
    """Last x of each run."""
    step_cost: dict[str, float]
    """Compute of one update step (b_p * n when x is rollouts, else 0): a smaller budget is no run."""
    cache: dict[tuple, FitResult] = field(default_factory=dict)

    def fit(self, key: Any, run_ids: Sequence[str], f_scale: float | None, **kw: Any) -> FitResult:
        """Pooled fit over ``run_ids`` (a multiset: a repeated run counts twice), cached."""
        ck = (key, tuple(sorted(run_ids)))
        if ck not in self.cache:
            xs = np.concatenate([self.xy[r][0] for r in run_ids])
            ys = np.concatenate([self.xy[r][1] for r in run_ids])
            self.cache[ck] = fit_saturating(xs, ys, f_scale=f_scale, **kw)
        return self.cache[ck]

    def span(self, run_ids: Sequence[str]) -> tuple[float, float]:
        """Budgets these runs can speak for: (cost of one step, furthest x reached)."""
        return min(self.step_cost[r] for r in run_ids), max(self.reach[r] for r in run_ids)


def _collect_runs(
    data: pd.DataFrame, metric: str, x: str, group: Sequence[str], use_rb: bool, bin_width: float
) -> _Runs:
    missing = [g for g in group if g not in data.columns]
    if missing:
        raise IsosimError(f"unknown group column(s) {', '.join(missing)}")
    per_run = data.groupby("run_id").agg(reach=(x, "max"), n=("n", "first"), b_p=("b_p", "first"))
    cost = per_run["n"] * per_run["b_p"] if x == "rollouts" else 0.0 * per_run["n"]
    pts = record_breaking(data, metric, bin_width, x) if use_rb else data
    xy = {
        str(r): (g[x].to_numpy(float), g[metric].to_numpy(float))
        for r, g in pts.groupby("run_id", sort=True)
    }
    groups: dict[Any, list[str]] = {}
    for k, ids in data.groupby(list(group), sort=True)["run_id"].unique().items():
        parts = k if isinstance(k, tuple) else (k,)
        key = tuple(int(v) if isinstance(v, np.integer) else v for v in parts)
        groups[key[0] if len(group) == 1 else key] = sorted(map(str, ids))
    if not groups:
        raise IsosimError("no n with at least one run")
    return _Runs(xy, groups, per_run["reach"].astype(float).to_dict(), cost.astype(float).to_dict())


def fit_per_n(
    df: pd.DataFrame,
    metric: str = "val_avg",
    group: Sequence[str] = ("n",),
    use_record_breaking: bool = True,
    *,
    bin_width: float = 0.01,
    x: str = "rollouts",
    f_scale: float | None = None,
) -> dict[Any, FitResult]:
    """One saturating fit per group (default: per ``n``), pooling the points of all its seeds.

    All rows of a group are pooled, whatever their ``b_p``; filter ``df`` first to fix ``b_p``,
    or pass ``group=("n", "b_p")`` (keys are then tuples).
    """
    data = _prepare(df, metric, x)
    runs = _collect_runs(data, metric, x, group, use_record_breaking, bin_width)
    return {k: runs.fit(k, ids, f_scale) for k, ids in runs.groups.items()}


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


def _envelope(
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


def _point_frontier(
    runs: _Runs, grid: np.ndarray, f_scale: float | None
) -> tuple[dict[int, FitResult], dict[int, tuple[float, float]], np.ndarray, np.ndarray, np.ndarray]:
    fits = {n: runs.fit(n, ids, f_scale) for n, ids in runs.groups.items()}
    span = {n: runs.span(ids) for n, ids in runs.groups.items()}
    rewards, n_star, reward = _envelope(fits, span, grid)
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
    data = _prepare(df, metric, x)
    xs = data[x].to_numpy(float)
    grid = _default_budgets(xs, n_budgets) if budgets is None else _check_budgets(budgets, xs)
    runs = _collect_runs(data, metric, x, ("n",), use_record_breaking, bin_width)
    fits, span, rewards, n_star, reward = _point_frontier(runs, grid, f_scale)
    return Frontier(grid, n_star.astype(int), reward, tuple(sorted(fits)), rewards, fits, span)


# ----------------------------------------------------------------------------------------------
# 4. n*(C) sigmoid
# ----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class NStarFit:
    """log2 n*(C) = lo + (hi - lo) / (1 + exp(-slope (log10 C - log_c_mid)))."""

    lo: float
    """log2 n* at small budgets."""
    hi: float
    """log2 n* at large budgets (the saturation level)."""
    log_c_mid: float
    """log10 of the budget halfway between the two levels."""
    slope: float
    """Steepness per decade of compute (0 for a constant n*)."""
    loss: float
    """Mean robust (Huber) loss per point, in squared octaves."""
    flat: bool = False
    """True when n* was constant over the budgets."""
    at_bound: tuple[str, ...] = ()
    """Parameters (``n_low``, ``n_sat``, ``log_c_mid``, ``slope``) that ended on a bound of the fit."""

    @property
    def n_sat(self) -> float:
        """Saturation value of n*: 2 ** hi."""
        return float(2.0**self.hi)

    @property
    def params(self) -> np.ndarray:
        """(lo, hi, log_c_mid, slope) as an array."""
        return np.array([self.lo, self.hi, self.log_c_mid, self.slope])

    def predict(self, c: float | np.ndarray) -> np.ndarray:
        """Fitted n*(C) (a float, not rounded to a tested n)."""
        return 2.0 ** _sigmoid(self.params, np.log10(np.asarray(c, dtype=float)), 1.0)


def fit_n_star(
    budgets: Sequence[float] | np.ndarray,
    n_star: Sequence[float] | np.ndarray,
    *,
    n_bounds: tuple[float, float] | None = None,
    f_scale: float = 0.5,
    slope_bounds: tuple[float, float] = (0.1, 30.0),
    starts: Sequence[Sequence[float]] = (),
    n_polish: int = 3,
) -> NStarFit:
    """Fit log2 n* as a sigmoid of log10 C (Huber loss, multi-start, bounded).

    ``lo`` and ``hi`` are bounded to log2 of ``n_bounds`` (default: the observed range of
    ``n_star``; ``analyze`` passes the tested range of n), ``log_c_mid`` to one decade around
    the budgets, ``slope`` to ``slope_bounds``. ``f_scale`` is in octaves. Multi-start as in
    ``fit_saturating`` (extra ``starts`` as (lo, hi, log_c_mid, slope)). A constant n* gives a
    flat fit with ``n_sat`` equal to that n. NaN entries are ignored.
    """
    c = np.asarray(budgets, dtype=float).ravel()
    n = np.asarray(n_star, dtype=float).ravel()
    if c.shape != n.shape:
        raise IsosimError(f"budgets and n_star must have the same length, got {len(c)} and {len(n)}")
    ok = np.isfinite(c) & np.isfinite(n) & (c > 0) & (n > 0)
    if not ok.any():
        raise IsosimError("no positive budget with a positive n* to fit")
    lc, ly = np.log10(c[ok]), np.log2(n[ok])
    if np.ptp(ly) == 0:
        mid = float((lc.min() + lc.max()) / 2)
        return NStarFit(float(ly[0]), float(ly[0]), mid, 0.0, 0.0, flat=True)
    n_lo, n_hi = (2.0 ** ly.min(), 2.0 ** ly.max()) if n_bounds is None else n_bounds
    if not 0 < n_lo < n_hi or ly.min() < math.log2(n_lo) - 1e-9 or ly.max() > math.log2(n_hi) + 1e-9:
        raise IsosimError(f"n_bounds {n_bounds} must be increasing and contain every n*")
    y_lo, y_hi = math.log2(n_lo), math.log2(n_hi)
    lower = np.array([y_lo, y_lo, lc.min() - 1.0, slope_bounds[0]])
    upper = np.array([y_hi, y_hi, lc.max() + 1.0, slope_bounds[1]])
    theta, cost = _robust_sigmoid(lc, ly, lower, upper, unit=1.0, f_scale=f_scale,
                                  starts=starts, n_polish=n_polish)
    lo, hi, lcm, s = (float(v) for v in theta)
    return NStarFit(lo, hi, lcm, s, cost / len(lc),
                    at_bound=_at_bound(theta, lower, upper, ("n_low", "n_sat", "log_c_mid", "slope")))


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
                     runs: _Runs) -> tuple[np.ndarray, float | None]:
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
            v[(budgets > xv.max() * (1 + REACH_RTOL)) | (budgets < runs.step_cost[str(rid)] * (1 - REACH_RTOL))] = np.nan
            gains.append(v)
        if not gains:
            continue
        gains = np.asarray(gains)
        k = np.isfinite(gains).sum(axis=0)
        with np.errstate(invalid="ignore"):
            mean = np.nanmean(np.where(k > 0, gains, 0.0), axis=0)
        learning |= (k > 0) & (mean > LEARN_Z * noise * np.sqrt(2.0 / np.maximum(k, 1)))
    return learning, base


def _nstar_summary(nfit: NStarFit | None, boot: list[NStarFit], n_max: float, ci: tuple[float, float],
                   used: int) -> dict[str, Any]:
    """The JSON block of one n*(C) fit (``fit`` or ``fit_tol``) with its bootstrap intervals."""

    def interval(vals: list[float]) -> list[float] | None:
        return [float(v) for v in np.percentile(vals, ci)] if vals else None

    if nfit is None:
        return {"n_sat": None, "n_sat_ci": None, "n_low": None, "log_c_mid": None, "log_c_mid_ci": None,
                "slope": None, "slope_ci": None, "loss": None, "flat": None, "saturated": None,
                "at_bound": [], "budgets_used": used}
    hi_ci = interval([f.hi for f in boot])
    return {
        "n_sat": nfit.n_sat,
        "n_sat_ci": None if hi_ci is None else [2.0**v for v in hi_ci],
        "n_low": 2.0**nfit.lo,
        "log_c_mid": nfit.log_c_mid,
        "log_c_mid_ci": interval([f.log_c_mid for f in boot]),
        "slope": nfit.slope,
        "slope_ci": interval([f.slope for f in boot]),
        "loss": nfit.loss,
        "flat": nfit.flat,
        "saturated": bool(nfit.hi < math.log2(n_max) - SAT_MARGIN_OCTAVES),
        "at_bound": list(nfit.at_bound),
        "budgets_used": used,
    }


def _fit_learning(grid: np.ndarray, n_curve: np.ndarray, learning: np.ndarray,
                  n_bounds: tuple[float, float] | None, **kw: Any) -> NStarFit | None:
    """``fit_n_star`` on the learning budgets only; None when none is left."""
    keep = learning & np.isfinite(n_curve)
    if not keep.any():
        return None
    return fit_n_star(grid[keep], n_curve[keep], n_bounds=n_bounds, **kw)


def _fit_warnings(name: str, block: dict[str, Any], n_max: float) -> list[str]:
    out = []
    if block["n_sat"] is None:
        return [f"{name}: no budget shows learning beyond the seed noise; no n*(C) fit"]
    if not block["saturated"]:
        out.append(f"{name}: the fitted upper level ({block['n_sat']:.0f}) reaches the largest n tried "
                   f"({n_max:.0f}): saturation is not seen, n_sat may lie higher")
    values = {"n_low": block["n_low"], "n_sat": block["n_sat"], "log_c_mid": block["log_c_mid"],
              "slope": block["slope"]}
    # n_sat / n_low on a bound = the largest / smallest n tried: said by `saturated` and the band
    bound = [f"{k} = {values[k]:.2f}" for k in block["at_bound"] if k in ("log_c_mid", "slope")]
    if bound:
        out.append(f"{name}: parameter(s) on a bound of the fit ({', '.join(bound)}): not determined by the data")
    return out


def analyze(
    df: pd.DataFrame,
    metric: str = "val_avg",
    budgets: Sequence[float] | np.ndarray | None = None,
    n_boot: int = 200,
    seed: int = 0,
    *,
    x: str = "rollouts",
    use_record_breaking: bool = True,
    bin_width: float = 0.01,
    n_budgets: int = 25,
    f_scale: float | None = None,
    ci: tuple[float, float] = (5.0, 95.0),
    tol: float = DEFAULT_TOL,
) -> dict[str, Any]:
    """Frontier, n*(C) and its sigmoid fits, with bootstrap intervals; a JSON-ready dict.

    Ties and noise: per budget, ``n_tol`` is the smallest n whose fitted curve is within ``tol``
    of the frontier (``n_tie_hi`` the largest); ``fit_tol`` fits n_tol(C) the way ``fit`` fits
    the argmax n*(C). A budget is *learning* when some n has gained over its own step-0 rows by
    more than the run-to-run noise allows (``learning_budgets``, ``seed_noise``); other budgets
    are kept in the lists but left out of both fits. A fit whose upper level reaches the largest n
    tried (within ``SAT_MARGIN_OCTAVES``) is marked ``saturated: false``.

    The bootstrap resamples runs with replacement within each n (an n with a single run
    resamples that run's fit points instead), with ``numpy.random.default_rng(seed)``, refits
    every curve and both n* sigmoids (warm-started from the point estimate), and reports the
    ``ci`` percentiles. ``fit.n_sat_ci`` spans both fits' intervals (every n in it ties with the
    frontier in some resample), ``fit.n_sat_ci_argmax`` is the argmax fit's alone; the per-budget
    band ``n_star_band`` runs from the resampled ``n_tol`` to the resampled ``n_tie_hi``.
    ``n_boot = 0`` skips it (intervals None). The keys are documented in ``write_frontier_json``.
    """
    if n_boot < 0:
        raise IsosimError(f"n_boot must be >= 0, got {n_boot}")
    if not (math.isfinite(tol) and tol >= 0):
        raise IsosimError(f"tol must be a non-negative number, got {tol}")
    data = _prepare(df, metric, x)
    xs = data[x].to_numpy(float)
    grid = _default_budgets(xs, n_budgets) if budgets is None else _check_budgets(budgets, xs)
    runs = _collect_runs(data, metric, x, ("n",), use_record_breaking, bin_width)
    n_values = sorted(runs.groups)
    n_max = float(max(n_values))
    n_bounds = (float(min(n_values)), n_max) if len(n_values) > 1 else None

    # ---- point estimate
    fits, span, rewards, n_star, reward = _point_frontier(runs, grid, f_scale)
    n_tol, n_tie_hi = tie_band(rewards, n_values, reward, tol)
    noise, noise_from = seed_noise(data, metric, x, fits)
    learning, base = learning_budgets(data, metric, x, grid, noise, runs)
    nfit = _fit_learning(grid, n_star, learning, n_bounds)
    tfit = _fit_learning(grid, n_tol, learning, n_bounds)

    # ---- bootstrap: resample runs within each n, refit curves, envelope and both n* sigmoids
    rng = np.random.default_rng(seed)
    boot_lo = np.full((n_boot, len(grid)), np.nan)
    boot_hi = np.full((n_boot, len(grid)), np.nan)
    boot_fit: list[NStarFit] = []
    boot_tol: list[NStarFit] = []
    nstar_cache: dict[tuple, NStarFit | None] = {}

    def cached_fit(curve: np.ndarray, start_fit: NStarFit | None) -> NStarFit | None:
        key = tuple(np.nan_to_num(curve, nan=-1.0))
        if key not in nstar_cache:
            kw = {"starts": [start_fit.params], "n_polish": 1} if start_fit is not None else {}
            nstar_cache[key] = _fit_learning(grid, curve, learning, n_bounds, **kw)
        return nstar_cache[key]

    for i in range(n_boot):
        b_fits, b_span = {}, {}
        for n, ids in runs.groups.items():
            if len(ids) > 1:
                pick = [ids[j] for j in rng.integers(0, len(ids), size=len(ids))]
                b_fits[n] = runs.fit(n, pick, f_scale, starts=[fits[n].params], n_polish=1)
            else:  # one run: resample its fit points
                px, py = runs.xy[ids[0]]
                j = rng.integers(0, len(px), size=len(px))
                b_fits[n] = fit_saturating(px[j], py[j], f_scale=f_scale, starts=[fits[n].params], n_polish=1)
            b_span[n] = runs.span(ids)
        b_rewards, b_star, b_reward = _envelope(b_fits, b_span, grid)
        boot_lo[i], boot_hi[i] = tie_band(b_rewards, n_values, b_reward, tol)
        for curve, start_fit, sink in ((b_star, nfit, boot_fit), (boot_lo[i], tfit, boot_tol)):
            if np.isfinite(curve).any():
                f = cached_fit(curve, start_fit)
                if f is not None:
                    sink.append(f)

    fit_block = _nstar_summary(nfit, boot_fit, n_max, ci, int(learning.sum()))
    tol_block = _nstar_summary(tfit, boot_tol, n_max, ci, int(learning.sum()))
    fit_block["n_sat_ci_argmax"] = fit_block["n_sat_ci"]
    cis = [c for c in (fit_block["n_sat_ci"], tol_block["n_sat_ci"]) if c]
    if cis:
        fit_block["n_sat_ci"] = [min(c[0] for c in cis), max(c[1] for c in cis)]
    band = None
    if n_boot > 0:
        band = {
            "lo": 2.0 ** np.nanpercentile(np.log2(boot_lo), ci[0], axis=0, method="lower"),
            "hi": 2.0 ** np.nanpercentile(np.log2(boot_hi), ci[1], axis=0, method="higher"),
        }
    warnings = _fit_warnings("argmax n*(C) fit", fit_block, n_max)
    warnings += [w for w in _fit_warnings("n_tol(C) fit", tol_block, n_max) if "no budget" not in w]
    if base is None:
        warnings.append("no step-0 rows: the base reward is unknown, every budget counted as learning")
    elif not learning.all():
        warnings.append(f"{int((~learning).sum())} of {len(grid)} budget(s) show no gain over the base reward "
                        f"({base:.4f}) beyond the run-to-run noise ({noise:.4f}); left out of the n*(C) fits")
    n_runs = {n: len(ids) for n, ids in runs.groups.items()}
    result = {
        "metric": metric,
        "x": x,
        "budgets": grid,
        "n_star": n_star.astype(int),
        "reward": reward,
        "n_star_band": band,
        "n_tol": n_tol.astype(int),
        "n_tie_hi": n_tie_hi.astype(int),
        "tol": tol,
        "learning": learning,
        "base_reward": base,
        "noise": noise,
        "noise_from": noise_from,
        "fit": fit_block,
        "fit_tol": tol_block,
        "warnings": warnings,
        "per_n": {
            str(n): {**fits[n].to_dict(), "min_rollouts": span[n][0], "max_rollouts": span[n][1],
                     "n_runs": n_runs[n]}
            for n in n_values
        },
        "n_values": n_values,
        "n_runs": int(sum(n_runs.values())),
        "b_p_values": sorted(int(v) for v in data["b_p"].unique()),
        "n_boot": n_boot,
        "seed": seed,
        "ci": list(ci),
        "use_record_breaking": use_record_breaking,
        "bin_width": bin_width,
    }
    return jsonable(result)


def write_frontier_json(result: dict[str, Any], path: str | Path) -> Path:
    """Write an ``analyze`` result as ``frontier.json`` (creating folders); returns the path.

    Schema (units of compute are those of ``x``, rollouts by default):

    ========================  ==================================================================
    ``metric``                str, the metric read (``val_avg``, ``val_best``, ...)
    ``x``                     str, the compute column (``rollouts``)
    ``budgets``               list[float], the budget grid C, ascending
    ``n_star``                list[int], compute-optimal n at each budget
    ``reward``                list[float], frontier reward at each budget
    ``n_star_band``           {``lo``, ``hi``}: lists, bootstrap band per budget from the resampled
                              n_tol (lo) to the resampled n_tie_hi (hi), or null
    ``n_tol``                 list[int], smallest n within ``tol`` of the frontier at each budget
    ``n_tie_hi``              list[int], largest n within ``tol`` of the frontier at each budget
    ``tol``                   float, the tie tolerance (units of the metric; 0.005 by default)
    ``learning``              list[bool], some n gained over its step-0 rows beyond the noise
                              (``learning_budgets``)
    ``base_reward``           float, mean metric of the step-0 rows, or null (none in the data)
    ``noise``, ``noise_from``  run-to-run standard deviation and how it was measured
                              (``seeds``, ``residuals`` or ``none``; see ``seed_noise``)
    ``fit.n_sat``             float, saturation n* = 2 ** (upper level of the n* sigmoid), fitted on
                              the learning budgets; null when no budget is learning (so are the
                              other numbers of ``fit``)
    ``fit.n_sat_ci``          [lo, hi] bootstrap interval of n_sat widened to ``fit_tol``'s
                              interval (ties), or null; ``fit.n_sat_ci_argmax``: the argmax fit's alone
    ``fit.saturated``         bool, false when the upper level reaches the largest n tried (within
                              half an octave): saturation not seen, n_sat may lie higher
    ``fit.at_bound``          list[str], parameters (n_low, n_sat, log_c_mid, slope) on a fit bound
    ``fit.budgets_used``      int, learning budgets the fit used
    ``fit_tol``               the same block (without n_sat_ci_argmax) for the fit of n_tol(C)
    ``warnings``              list[str], what a reader must know (not saturated, bounds, no learning)
    ``fit.n_low``             float, n* at small budgets (2 ** lower level)
    ``fit.log_c_mid``         float, log10 of the budget halfway up the n* sigmoid
    ``fit.log_c_mid_ci``      [lo, hi] or null
    ``fit.slope``             float, steepness per decade of compute (0 when n* is constant)
    ``fit.slope_ci``          [lo, hi] or null
    ``fit.loss``, ``fit.flat``  robust loss per point (octaves^2); true when n* is constant
    ``per_n``                 {str(n): {r0, a, c_mid, log_c_mid, b, loss, n_points, flat, at_bound,
                              min_rollouts, max_rollouts, n_runs}}: each n's fitted curve and
                              the budgets it competes on (one step's cost to furthest reach)
    ``n_values``              list[int], the n in the data
    ``n_runs``                int, runs in all
    ``b_p_values``            list[int], the b_p in the data
    ``n_boot``, ``seed``, ``ci``  bootstrap size, its seed, percentiles of the intervals
    ``use_record_breaking``, ``bin_width``  how the fit points were chosen
    ========================  ==================================================================
    """
    missing = [k for k in ("metric", "budgets", "n_star", "reward", "fit") if k not in result]
    if missing:
        raise IsosimError(f"not an analyze result: missing {', '.join(missing)}")
    return write_json(path, result, indent=2)


# ----------------------------------------------------------------------------------------------
# Side analyses
# ----------------------------------------------------------------------------------------------
def metric_split(
    df: pd.DataFrame,
    metrics: Sequence[str] = ("val_best", "val_worst"),
    budgets: Sequence[float] | np.ndarray | None = None,
    n_boot: int = 0,
    seed: int = 0,
    **kwargs: Any,
) -> dict[str, dict[str, Any]]:
    """n*(C) for each metric on one shared budget grid (coverage best@k vs sharpening worst@k).

    Returns metric -> ``analyze`` result (no bootstrap unless ``n_boot`` > 0); ``kwargs`` go
    to ``analyze``.
    """
    if not metrics:
        raise IsosimError("metric_split needs at least one metric")
    x = kwargs.get("x", "rollouts")
    if budgets is None:
        data = _prepare(df, metrics[0], x)
        budgets = _default_budgets(data[x].to_numpy(float), kwargs.pop("n_budgets", 25))
    return {m: analyze(df, m, budgets, n_boot=n_boot, seed=seed, **kwargs) for m in metrics}


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
    data = _prepare(df, metric, x)
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
    data = _prepare(df, metric, "step")
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
    data = _prepare(df, HIST_COLUMNS[0], x)
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
