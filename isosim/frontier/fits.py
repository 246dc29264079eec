"""The fits of the frontier analysis: a robust monotone sigmoid in log compute, per ``n``
(:func:`fit_saturating`, :func:`fit_per_n`, on each run's points: :func:`collect_runs`) and for
``n*(C)`` (:func:`fit_n_star`); see :mod:`isosim.frontier.analysis`."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from isosim.errors import IsosimError

if TYPE_CHECKING:  # pandas (through points) and scipy are imported where used: reading a fit needs neither
    import pandas as pd

LN10 = math.log(10.0)


def expit(x: Any) -> Any:
    """scipy's logistic function, imported on first use: recommend's answer bank reads an unsaturated fit
    without importing scipy, whose import costs more than the read."""
    from scipy.special import expit as logistic

    return logistic(x)


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
    from scipy.optimize import least_squares

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
class RunPoints:
    """Fit points per run, the runs of each group, and the compute range each run covers."""

    xy: dict[str, tuple[np.ndarray, np.ndarray]]
    groups: dict[Any, list[str]]
    reach: dict[str, float]
    """Last x of each run."""
    step_cost: dict[str, float]
    """Compute of one update step (b_p * n when x is rollouts, else 0): a smaller budget is no run."""
    cache: dict[tuple, FitResult] = field(default_factory=dict)
    series: dict[str, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)
    """Every evaluation of each run (x ascending, metric), not only its record-breaking points:
    what the run measured, which caps its fitted curve (:meth:`measured`)."""

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

    def reaches(self, run_id: str, budgets: np.ndarray) -> np.ndarray:
        """Whether the run competes at each budget: one step of it fits in the budget (within
        ``REACH_RTOL``), and it stopped at most one step short of it (runs stop at whole steps: a
        run of 2,048 rollouts a step planned for 99,840 ends at 98,304) or within ``REACH_RTOL``."""
        from isosim.records import REACH_RTOL

        b = np.asarray(budgets, dtype=float)
        step, reach = self.step_cost[run_id], self.reach[run_id]
        return (step <= b * (1 + REACH_RTOL)) & ((reach + step >= b * (1 - 1e-9)) | (reach >= b * (1 - REACH_RTOL)))

    def measured_run(self, run_id: str, budgets: np.ndarray, reading: str = "best") -> np.ndarray:
        """The run's measured value at each budget, as the plane reads runs
        (:func:`isosim.validation.scoreboard.values_at`): ``final`` its evaluations interpolated in log
        x at the budget (its last one past its last evaluation, linearly from its step-0 row below its
        first), ``best`` the larger of that and every evaluation at or below the budget; NaN where the
        run does not compete (:meth:`reaches`) or has no evaluation at or below the budget."""
        if reading not in ("best", "final"):
            raise IsosimError(f"reading must be best or final, got {reading!r}")
        b = np.asarray(budgets, dtype=float)
        xs, ys = self.series[run_id]
        out = np.full(len(b), np.nan)
        pos = xs > 0
        xp, yp = xs[pos], ys[pos]
        if len(xp):
            inside = b >= xp[0]
            out[inside] = np.interp(np.log(b[inside]), np.log(xp), yp)  # held at the last value past it
            if (~pos).any():
                below = ~inside & (b > 0)
                out[below] = np.interp(b[below], [0.0, xp[0]], [float(ys[~pos].mean()), yp[0]])
        elif len(ys):
            out[:] = float(ys.mean())
        if reading == "best" and len(ys):
            k = np.searchsorted(xs, b * (1 + 1e-9), side="right")  # evaluations at x <= C
            run_max = np.maximum.accumulate(ys)[np.maximum(k - 1, 0)]
            out = np.where(k > 0, np.fmax(out, run_max), out)
        return np.where(self.reaches(run_id, b), out, np.nan)

    def measured(self, run_ids: Sequence[str], budgets: np.ndarray, reading: str = "best") -> np.ndarray:
        """Seed mean of :meth:`measured_run` over ``run_ids`` (a multiset), per budget; NaN where no
        run competes."""
        vals = np.array([self.measured_run(r, budgets, reading) for r in run_ids])
        k = np.isfinite(vals).sum(axis=0)
        return np.where(k > 0, np.nansum(vals, axis=0) / np.maximum(k, 1), np.nan)


def collect_runs(
    data: pd.DataFrame, metric: str, x: str, group: Sequence[str], use_rb: bool, bin_width: float
) -> RunPoints:
    from isosim.frontier.points import record_breaking

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
    series = {
        str(r): (g[x].to_numpy(float), g[metric].to_numpy(float))
        for r, g in data.sort_values([x, "step"], kind="stable").groupby("run_id", sort=True)
    }
    return RunPoints(xy, groups, {str(k): float(v) for k, v in per_run["reach"].items()},
                     {str(k): float(v) for k, v in cost.items()}, series=series)


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
    from isosim.frontier.points import prepare

    data = prepare(df, metric, x)
    runs = collect_runs(data, metric, x, group, use_record_breaking, bin_width)
    return {k: runs.fit(k, ids, f_scale) for k, ids in runs.groups.items()}


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
