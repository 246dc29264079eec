"""Curve fidelity: a simulator's validation curves against a real sweep's, per n, in seed se.

A real sweep is ``runs[n][seed]`` = [(rollouts, value), ...] (the records' curves). For every n it is
read at *matched update steps* (:data:`STEPS`: the same step counts for every n, where the gain per
step shows) and at *matched rollouts* (:data:`ROLLOUTS`: the same compute for every n, where n*
is read); each point is the seed mean, linear in ln rollouts between evaluations, and only points
every seed reaches count. The unit of error is the seed se of that n: the seed-to-seed sd pooled
over the run's evaluations after step 0, over sqrt(seeds). A simulator's value at the same
points is compared as ``(simulated - measured) / se``; a sweep's score is the mean absolute error
and the mean signed error (bias) over its n and points.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

STEPS = (10, 25, 50, 100, 200, 400, 800, 1600, 3200, 6400, 12800, 25600)
ROLLOUTS = (2e3, 5e3, 1e4, 2e4, 5e4, 1e5, 2e5, 5e5, 1e6, 2e6)
Curve = Sequence[tuple[float, float]]


def _at(curve: Curve, rollouts: float) -> float:
    pts = [(float(r), float(v)) for r, v in curve if r > 0]
    if not pts or rollouts > pts[-1][0] * 1.001 or rollouts < pts[0][0] * 0.999:
        return math.nan
    return float(np.interp(math.log(rollouts), np.log([p[0] for p in pts]), [p[1] for p in pts]))


def seed_se(seeds: Mapping[int, Curve]) -> float:
    """Seed se of one n: the seed sd pooled over the evaluations after step 0, over sqrt(seeds)."""
    curves = list(seeds.values())
    if len(curves) < 2:
        return math.nan
    rs = sorted({float(r) for c in curves for r, _ in c if r > 0})
    var = []
    for r in rs:
        vals = [v for c in curves for rr, v in c if float(rr) == r]
        if len(vals) == len(curves):
            var.append(float(np.var(vals, ddof=1)))
    return math.sqrt(float(np.mean(var)) / len(curves)) if var else math.nan


def measured(runs: Mapping[int, Mapping[int, Curve]], b_p: int) -> dict[str, Any]:
    """Per n: the seed-mean at the matched steps and rollouts that every seed reaches, and the se."""
    out = {}
    for n, seeds in sorted(runs.items()):
        entry: dict[str, Any] = {"se": seed_se(seeds), "steps": {}, "rollouts": {}}
        for kind, xs in (("steps", STEPS), ("rollouts", ROLLOUTS)):
            for x in xs:
                r = x * b_p * n if kind == "steps" else x
                vals = [_at(c, r) for c in seeds.values()]
                if vals and all(math.isfinite(v) for v in vals):
                    entry[kind][str(int(x))] = float(np.mean(vals))
        out[str(int(n))] = entry
    return out


def errors(meas: Mapping[str, Any], sim: Mapping[str, Mapping[str, Mapping[str, float]]]) -> dict[str, Any]:
    """(simulated - measured) / se at every point both have; per n and per matching, and the
    sweep's mean |error| and mean error per matching."""
    per_n, pooled = {}, {"steps": [], "rollouts": []}
    for n, m in meas.items():
        if n not in sim or not (m["se"] > 0):
            continue
        per_n[n] = {}
        for kind in ("steps", "rollouts"):
            errs = {x: (sim[n][kind][x] - v) / m["se"] for x, v in m[kind].items() if x in sim[n].get(kind, {})}
            per_n[n][kind] = errs
            pooled[kind].extend(errs.values())
    summary = {kind: {"mean_abs_se": float(np.mean(np.abs(v))) if v else math.nan,
                      "mean_se": float(np.mean(v)) if v else math.nan, "points": len(v)} for kind, v in pooled.items()}
    return {"per_n": per_n, **summary}


def simulated_points(curves: Mapping[int, Curve], b_p: int, meas: Mapping[str, Any]) -> dict[str, Any]:
    """A simulator's seed-mean curves (``curves[n]`` = [(rollouts, value)]) at the points ``meas`` has."""
    out = {}
    for n, m in meas.items():
        if int(n) not in curves:
            continue
        c = curves[int(n)]
        out[n] = {"steps": {}, "rollouts": {}}
        for kind in ("steps", "rollouts"):
            for x in m[kind]:
                r = float(x) * b_p * int(n) if kind == "steps" else float(x)
                v = _at(c, r)
                if math.isfinite(v):
                    out[n][kind][x] = round(v, 6)
    return out
