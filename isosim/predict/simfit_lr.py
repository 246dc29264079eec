"""The frozen simfit method made lr-aware: one calibration of a learner, read under the lr rule its
runs were trained with.

The frozen method (:mod:`isosim.predict.simfit_frozen`) was calibrated and scored on sweeps trained
at the square-root rule (each run's lr = base x sqrt(B_p n / 1024)). A user who trains every n at
one learning rate (TRL's and verl's practice: the ``constant`` rule) gives a small group a larger
step than that rule would, and a large group a smaller one. Two things follow, and this module adds
exactly those two to the frozen model, so that under the sqrt rule it *is* the frozen method (the
same fit, the same picks: a test checks it on the committed sweeps):

1. **The step.** The simulated step of ``n`` grows with the rollout batch as
   ``(B_p n / 1024) ** power``; the frozen prior's ``power`` was read from sqrt-rule runs, so a run
   trained at a rule of exponent ``e`` (0 constant, 0.5 sqrt, 1 linear) takes
   ``power + (e - 0.5)``.
2. **Diffusion.** Under Adam every step moves about lr, in a direction that is mostly rollout noise
   when a group is small; over ``M = C / (B_p n)`` steps the noise part of the walk grows as
   ``M lr_n**2``, which per rollout is ``lr_n**2 / (B_p n)``: n-free under the sqrt rule (the flat
   top of every sqrt-rule sweep measured), ``1 / n`` under a constant lr. Relative to the rule the
   method was calibrated at, run ``n`` walks ``q_n = (lr_n / lr_sqrt(n))**2`` times as far a
   rollout; the part above the calibrated one, ``max(q_n - 1, 0)``, costs value at a rate fitted
   to the cheap run: ``v = v_frozen * exp(-decay * (C / 1e6) * max(q_n - 1, 0))`` (a multiplicative
   decay: the value never goes below 0). ``decay`` is free with a prior (0, :data:`DECAY_SD`) where
   the cheap run walks further than the calibrated rule (``q > 1``), and absent otherwise.

This is a mechanism argued, not measured on a constant-lr sweep's full records: it was written after
the constant-lr cheap part of the second organism (every n to 5e4 rollouts) had been seen, and
before any of its records past 5e4 existed. Its numbers other than the lr rule are the frozen
method's; ``decay`` is fitted per user from the measured n only.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from isosim.errors import IsosimError
from isosim.predict import simfit as sf

RULE_EXPONENT = {"constant": 0.0, "sqrt": 0.5, "linear": 1.0}
"""lr = base x (B_p n / reference batch) ** exponent"""
CALIBRATED_RULE = "sqrt"
"""the rule of every sweep the frozen method was calibrated and scored on"""
LR_REF_BATCH = 1024
DECAY_SD = 1.0
"""prior sd of ``decay`` (value lost per 1e6 rollouts per unit of excess squared step), fixed a priori"""
DECAY_SCALE = 1e6
DECAY_MAX = 50.0


def check_rule(rule: str) -> str:
    """``rule`` if it is one of :data:`RULE_EXPONENT`, else one clear error."""
    if rule not in RULE_EXPONENT:
        raise IsosimError(f"unknown lr rule {rule!r}: one of {', '.join(RULE_EXPONENT)}")
    return rule


def excess_walk(n: int, b_p: int, rule: str, ref: int = LR_REF_BATCH) -> float:
    """``max(q_n - 1, 0)``: how much further per rollout run ``n`` walks under ``rule`` than under
    the calibrated sqrt rule from the same lr at the reference batch."""
    e = RULE_EXPONENT[check_rule(rule)]
    q = (b_p * n / ref) ** (2.0 * (e - RULE_EXPONENT[CALIBRATED_RULE]))
    return max(q - 1.0, 0.0)


def theta_under(theta: Mapping[str, float], rule: str) -> dict[str, float]:
    """The frozen model's numbers for runs trained at ``rule``: the step's exponent shifted by the
    rule's (item 1 of the module docstring)."""
    th = dict(theta)
    if check_rule(rule) != CALIBRATED_RULE:
        th["power"] = th["power"] + (RULE_EXPONENT[rule] - RULE_EXPONENT[CALIBRATED_RULE])
    return th


def predict_at(bank: Mapping[str, Any], theta: Mapping[str, float], n: int, rollouts: np.ndarray, v0: float,
               rule: str) -> np.ndarray:
    """The frozen model's value of ``n`` at ``rollouts`` under ``rule``, decayed by the excess walk."""
    base = sf.predict_at(bank, theta_under(theta, rule), n, rollouts, v0)
    decay = float(theta.get("decay", 0.0))
    if decay <= 0:
        return base
    x = np.maximum(np.asarray(rollouts, float), 0.0) / DECAY_SCALE * excess_walk(n, bank["b_p"], rule)
    return base * np.exp(-decay * x)


def value(bank: Mapping[str, Any], theta: Mapping[str, float], n: int, budget: float, reading: str, v0: float,
          rule: str) -> float:
    """The predicted value of ``n`` at ``budget`` in a reading (``best``: the largest up to C), minus
    the step-0 value ``v0`` (a gain, as :func:`isosim.predict.simfit.value`, which it is when
    nothing decays)."""
    if float(theta.get("decay", 0.0)) <= 0:
        return sf.value(bank, theta_under(theta, rule), n, budget, reading)
    r, _ = sf.gain_curve(bank, n, 1.0)
    pts = np.append(r[(r > 0) & (r < budget)], budget)
    v = predict_at(bank, theta, n, pts, v0, rule) - v0
    return float(v.max() if reading == "best" else v[-1])


def fit(bank: Mapping[str, Any], points: Sequence[tuple[int, float, float]], prior: Mapping[str, tuple[float, float]],
        free: Sequence[str], rule: str, noise: float = sf.NOISE) -> dict[str, Any]:
    """:func:`isosim.predict.simfit.fit` under ``rule``: the same least squares and prior, with
    ``decay`` free (prior 0, :data:`DECAY_SD`) when a measured n walks further than the calibrated
    rule. Under the calibrated rule this is :func:`isosim.predict.simfit.fit` itself."""
    from scipy.optimize import least_squares

    if check_rule(rule) == CALIBRATED_RULE:
        return sf.fit(bank, points, prior, free)
    zero = [v for _, r, v in points if r <= 0]
    later = [(int(n), float(r), float(v)) for n, r, v in points if r > 0]
    if not zero or not later:
        raise IsosimError("the lr-aware fit needs the cheap runs' step-0 evaluation and at least one after it")
    v0 = float(np.mean(zero))
    start = {p: prior[p][0] for p in sf.PARAMS if p in prior}
    names = [p for p in free if p in start]
    walks = any(excess_walk(int(n), bank["b_p"], rule) > 0 for n, _, _ in later)
    names_all = names + (["decay"] if walks else [])
    pri = {**{p: prior[p] for p in names}, "decay": (0.0, DECAY_SD)}

    def theta(x: np.ndarray) -> dict[str, float]:
        return {**start, "decay": 0.0, **dict(zip(names_all, (float(v) for v in x)))}

    def residuals(x: np.ndarray) -> np.ndarray:
        th = theta(x)
        res = [(predict_at(bank, th, n, np.array([r]), v0, rule)[0] - v) / noise for n, r, v in later]
        res += [(th[p] - pri[p][0]) / pri[p][1] for p in names_all]
        return np.array(res)

    lo = [sf.BOUNDS[p][0] for p in names] + ([0.0] if walks else [])
    hi = [sf.BOUNDS[p][1] for p in names] + ([DECAY_MAX] if walks else [])
    x0 = np.clip([start[p] for p in names] + ([0.0] if walks else []), np.array(lo) + 1e-9, np.array(hi) - 1e-9)
    res = least_squares(residuals, x0, bounds=(lo, hi), diff_step=1e-3, x_scale=1.0)
    data = residuals(res.x)[:len(later)] * noise
    return {"theta": theta(res.x), "v0": v0, "rms": float(np.sqrt(np.mean(data ** 2))), "points": len(later)}


def choose(bank: Mapping[str, Any], points: Sequence[tuple[int, float, float]], grid: Sequence[int], budget: float,
           prior: Mapping[str, tuple[float, float]], free: Sequence[str], band: float, stay: Sequence[int],
           rule: str) -> dict[str, Any]:
    """:func:`isosim.predict.simfit_frozen.choose` under ``rule``: fit, read every n of ``grid`` at
    ``budget`` in both readings, keep the best measured n within ``band`` of the best, else the best."""
    res = fit(bank, points, prior, free, rule)
    out: dict[str, Any] = {"theta": res["theta"], "v0": res["v0"], "rms": res["rms"], "points": res["points"],
                           "lr_rule": rule}
    for reading in ("best", "final"):
        vals = {int(n): value(bank, res["theta"], n, budget, reading, res["v0"], rule) for n in grid}
        top = max(vals.values())
        best = max(vals, key=lambda n: (round(vals[n], 6), -n))
        kept = [n for n in stay if n in vals and vals[n] >= top - band]
        out[reading] = {"pick": int(max(kept, key=lambda n: vals[n]) if kept else best), "simulator_best": int(best),
                        "predicted_gain": {str(n): v for n, v in vals.items()},
                        "within_band": sorted(n for n, v in vals.items() if v >= top - band)}
    return out

