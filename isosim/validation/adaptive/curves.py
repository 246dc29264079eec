"""Reading a run's curve of (rollouts, value) evaluations: its local line, its curvature, the
evaluations' noise, its value at a budget, and the part of it a run paused at a target has written."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from isosim.validation.readings import final_at

Curve = Sequence[tuple[float, float]]
"""(rollouts, value) pairs of one run, in order of rollouts."""

REACH_RTOL = 1e-9


def local_fit(curve: Curve, at: float, window_octaves: float = 2.0) -> tuple[float, float, float, float]:
    """(level at ``at``, slope per unit ln rollouts, and their variances per unit evaluation
    variance) of a least-squares line in ln rollouts through the run's evaluations within
    ``window_octaves`` below its last one (at least the last two). A single evaluation gives
    slope 0 with an unbounded variance (nothing can be concluded about its trend)."""
    pts = [(float(r), float(v)) for r, v in curve if r > 0 and math.isfinite(v)]
    if not pts:
        vals = [float(v) for _, v in curve if math.isfinite(v)]
        return (vals[-1] if vals else float("nan")), 0.0, 1.0, math.inf
    last = pts[-1][0]
    win = [p for p in pts if p[0] >= last / 2 ** window_octaves]
    if len(win) < 2:
        win = pts[-2:]
    if len(win) < 2:
        return win[-1][1], 0.0, 1.0, math.inf
    x = np.log([p[0] for p in win])
    y = np.array([p[1] for p in win])
    slope, icpt = np.polyfit(x, y, 1)
    sxx = float(((x - x.mean()) ** 2).sum())
    xa = math.log(at)
    return (float(icpt + slope * xa), float(slope), 1 / len(x) + (xa - x.mean()) ** 2 / sxx, 1 / sxx)


def accelerating(curve: Curve, sigma: float, z: float = 2.0, last: int = 5) -> bool:
    """Whether the run's last ``last`` evaluations curve upwards in ln rollouts beyond noise (a
    quadratic's x^2 coefficient above ``z`` of its standard error at evaluation noise ``sigma``):
    the run is still taking off, so its slope understates what it will gain."""
    pts = [(math.log(r), v) for r, v in curve if r > 0 and math.isfinite(v)][-last:]
    if len(pts) < 4:
        return False
    x = np.array([p[0] for p in pts])
    x = x - x.mean()
    X = np.stack([x ** 2, x, np.ones_like(x)], axis=1)
    xtx = X.T @ X
    if abs(np.linalg.det(xtx)) < 1e-12:
        return False
    coef = np.linalg.solve(xtx, X.T @ np.array([p[1] for p in pts]))
    se = sigma * math.sqrt(float(np.linalg.inv(xtx)[0, 0]))
    return bool(coef[0] > z * se)


def past_takeoff(curve: Curve, frac: float = 0.75) -> list[tuple[float, float]]:
    """The evaluations of a run from the first one at ``frac`` of its rise (first evaluation to its
    best) on: the part read as a slowly bending line, where the take-off's curvature is over."""
    pts = [(float(r), float(v)) for r, v in curve if r > 0 and math.isfinite(v)]
    if len(pts) < 2:
        return pts
    lo, hi = pts[0][1], max(v for _, v in pts)
    i = next(i for i, (_, v) in enumerate(pts) if v >= lo + frac * (hi - lo))
    return pts[i:]


def roughness(curves: Sequence[Curve], last: int = 4, takeoff: bool = False) -> tuple[float, int]:
    """Robust spread of single evaluations around their neighbours' line (ln rollouts), from the
    last ``last`` evaluations of every curve (with ``takeoff``, only those past the take-off, see
    :func:`past_takeoff`): (sigma, number of triples used)."""
    devs = []
    for c in curves:
        c = past_takeoff(c) if takeoff else c
        pts = [(math.log(r), v) for r, v in c if r > 0 and math.isfinite(v)][-last:]
        for (x0, y0), (x1, y1), (x2, y2) in zip(pts, pts[1:], pts[2:]):
            if x2 <= x0:
                continue
            w = (x2 - x1) / (x2 - x0)  # weight of the left neighbour in the interpolation at x1
            devs.append(abs(y1 - (w * y0 + (1 - w) * y2)) / math.sqrt(1 + w * w + (1 - w) ** 2))
    if not devs:
        return 0.0, 0
    return float(1.4826 * np.median(devs)), len(devs)


def noise(curves: Sequence[Curve], levels: Sequence[float], eval_samples: int | None,
          takeoff: bool = False) -> dict[str, Any]:
    """sigma of one evaluation of one run: max(sampling error, roughness), with both."""
    rough, k = roughness(curves, takeoff=takeoff)
    samp = 0.0
    if eval_samples:
        v = min((x for x in levels if math.isfinite(x)), key=lambda x: abs(x - 0.5), default=0.5)
        v = min(max(v, 0.0), 1.0)
        samp = math.sqrt(max(v * (1 - v), 1e-12) / eval_samples)
    return {"sigma": max(samp, rough), "sampling": samp, "roughness": rough, "roughness_triples": k,
            "source": "sampling" if samp >= rough else "roughness"}


def value_at_steps(curve: Curve, rollouts: float) -> float:
    """A run's value at ``rollouts`` (linear in ln rollouts between its evaluations); beyond its
    last evaluation +inf (not reached: nothing says the other run is ahead)."""
    pts = [(float(r), float(v)) for r, v in curve if r > 0 and math.isfinite(v)]
    if not pts or rollouts > pts[-1][0] * (1 + REACH_RTOL):
        return math.inf
    if rollouts <= pts[0][0]:
        return pts[0][1]
    return float(np.interp(math.log(rollouts), np.log([p[0] for p in pts]), [p[1] for p in pts]))


def spent(curve: Curve) -> float:
    return float(curve[-1][0]) if curve else 0.0



def reveal(curve: Curve, target: float) -> list[tuple[float, float]]:
    """The part of a complete curve a run paused at ``target`` rollouts has written: every
    evaluation up to its last one at or below the target (up to its first positive one if none
    is: a run is always paused on an evaluation, the one that tells)."""
    out = []
    for r, v in curve:
        if r > target * (1 + REACH_RTOL) and any(p[0] > 0 for p in out):
            break
        out.append((float(r), float(v)))
        if r > target * (1 + REACH_RTOL):
            break
    return out


def value_at(curve: Curve, budget: float, rtol: float = 0.01) -> float:
    """A run's value at ``budget`` rollouts: linear in ln rollouts between its evaluations; a run
    ending within ``rtol`` short of the budget counts at its last point; NaN if it ends earlier
    (the ``final`` reading of :mod:`isosim.validation.readings`)."""
    return final_at(curve, budget, rtol)

