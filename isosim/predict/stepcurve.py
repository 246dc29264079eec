"""Choosing n for a budget C from a cheap part: every n run to a small share of C, each curve read
forward to C.

A run of n rollouts per problem at B_p problems per step takes ``S_n = C / (B_p n)`` updates in a
budget C. The readers here (``METHODS``) predict each n's value at C from the cheap curves alone:

- ``level``: the cheap runs' leader (each n's last value in the cheap part; no extrapolation).
- ``lc-sigmoid``: each n's curve fitted alone with ScaleRL's sigmoid in log rollouts
  (``R0 + (A - R0) / (1 + (C_mid / c) ** B)``) and read at C.
- ``steps``: the curves read by update steps. Where curves of different n nearly collapse at
  matched steps, the value n reaches after its S_n steps at C is what the pooled step curve of the
  runs that already took S_n steps in the cheap part (the smaller n) shows there; past the most
  steps any cheap run took, the pooled curve is held at its last value. ``best`` reads the pooled
  curve's best up to S_n, ``final`` its value at S_n.
- ``best-level``: each n's best evaluation in the cheap part.
- ``steps-near``: ``steps`` pooling, for each n, only the runs of n up to ``NEAR_OCTAVES`` below
  it (the collapse holds between neighbouring n, not across the grid).
- ``steps-offset``: ``steps`` plus each n's mean gap to the other runs at matched steps (its own
  per-step gain) carried to C.
- ``steps-sigmoid``: one sigmoid in log steps for every n, ``R0 + (A - R0) / (1 + (s_mid / (s g_n))
  ** B)`` with a per-step gain ``g_n = (n / n_min) ** gamma``, fitted to every cheap curve at once
  and read at S_n.

:func:`predict` applies one reader to each seed's cheap runs and reports the pick, the tie band
and each n's expected regret with its seed standard error, in the reading asked for.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from isosim.errors import IsosimError
from isosim.validation.readings import check_reading

Curve = Sequence[tuple[float, float]]
METHODS = ("level", "best-level", "lc-sigmoid", "steps", "steps-near", "steps-offset", "steps-sigmoid")
NEAR_OCTAVES = 2.0


def _positive(curve: Curve) -> list[tuple[float, float]]:
    return [(float(r), float(v)) for r, v in curve if r > 0 and math.isfinite(v)]


def _interp_log(points: Sequence[tuple[float, float]], x: float) -> float:
    xs = np.log([p[0] for p in points])
    return float(np.interp(math.log(x), xs, [p[1] for p in points]))


def _sigmoid(logx: np.ndarray, r0: float, a: float, log_mid: float, b: float) -> np.ndarray:
    return r0 + (a - r0) / (1.0 + np.exp(b * (log_mid - logx)))


def _r0(curves: Mapping[int, Curve]) -> float:
    zero = [float(v) for c in curves.values() for r, v in c if r <= 0 and math.isfinite(v)]
    if zero:
        return float(np.mean(zero))
    return float(min(v for c in curves.values() for _, v in _positive(c)))


def lc_sigmoid(curves: Mapping[int, Curve], budget: float) -> dict[int, float]:
    """Each n's cheap curve fitted alone with ScaleRL's sigmoid in log rollouts, read at ``budget``
    (an n with fewer than three evaluations past step 0 keeps its last value)."""
    from scipy.optimize import least_squares

    r0 = _r0(curves)
    out = {}
    for n, c in curves.items():
        pts = _positive(c)
        if len(pts) < 3:
            out[n] = pts[-1][1] if pts else r0
            continue
        x, y = np.log([p[0] for p in pts]), np.array([p[1] for p in pts])

        def resid(p, x=x, y=y):
            return _sigmoid(x, r0, p[0], p[1], p[2]) - y

        p0 = [max(y.max(), r0 + 1e-3), float(np.median(x)), 1.0]
        fit = least_squares(resid, p0, bounds=([r0, x.min() - 5, 0.05], [1.0, x.max() + 10, 10.0]))
        out[n] = float(_sigmoid(np.array([math.log(budget)]), r0, *fit.x)[0])
    return out


def _step_curves(curves: Mapping[int, Curve], b_p: int) -> dict[int, list[tuple[float, float]]]:
    return {n: [(r / (b_p * n), v) for r, v in _positive(c)] for n, c in curves.items()}


def _pooled(steps: Mapping[int, Sequence[tuple[float, float]]], s: float, skip: int | None = None,
            near: int | None = None) -> float:
    """Mean value at ``s`` steps over the runs that reached ``s`` (NaN when none did); ``near``:
    only the runs of n from ``NEAR_OCTAVES`` below ``near`` up to ``near``."""
    vals = [_interp_log(c, s) for n, c in steps.items() if n != skip and c and c[-1][0] >= s * (1 - 1e-9)
            and (near is None or near * 2 ** -NEAR_OCTAVES <= n <= near)]
    return float(np.mean(vals)) if vals else float("nan")


def steps_pooled(curves: Mapping[int, Curve], b_p: int, budget: float, reading: str = "best",
                 offset: bool = False, near: bool = False) -> dict[int, float]:
    """The ``steps`` reader (``offset``: ``steps-offset``; ``near``: ``steps-near``); see the
    module docstring."""
    check_reading(reading)
    steps = _step_curves(curves, b_p)
    if not any(steps.values()):
        raise IsosimError("the cheap part holds no evaluation past step 0")
    out = {}
    for n in curves:
        use = {m: c for m, c in steps.items() if not near or n * 2 ** -NEAR_OCTAVES <= m <= n}
        grid = sorted({s for c in use.values() for s, _ in c})
        if not grid:
            out[n] = _r0(curves)
            continue
        at = min(budget / (b_p * n), grid[-1])
        here = _pooled(use, at)
        if reading == "best":
            here = max([here] + [_pooled(use, s) for s in grid if s <= at * (1 + 1e-9)])
        if offset and steps[n]:
            gaps = [v - _pooled(steps, s, skip=n) for s, v in steps[n]]
            gaps = [g for g in gaps if math.isfinite(g)]
            here += float(np.mean(gaps)) if gaps else 0.0
        out[n] = float(here)
    return out


def steps_sigmoid(curves: Mapping[int, Curve], b_p: int, budget: float) -> dict[int, float]:
    """The ``steps-sigmoid`` reader; see the module docstring."""
    from scipy.optimize import least_squares

    r0 = _r0(curves)
    steps = _step_curves(curves, b_p)
    n0 = min(curves)
    rows = [(math.log(s), math.log(n / n0), v) for n, c in steps.items() for s, v in c]
    if len(rows) < 4:
        raise IsosimError("the cheap part holds fewer than four evaluations past step 0")
    ls, ln, y = (np.array(col) for col in zip(*rows))

    def resid(p):
        return _sigmoid(ls + p[3] * ln, r0, p[0], p[1], p[2]) - y

    p0 = [max(y.max(), r0 + 1e-3), float(np.median(ls)), 1.0, 0.0]
    fit = least_squares(resid, p0, bounds=([r0, ls.min() - 5, 0.05, -1.0], [1.0, ls.max() + 10, 10.0, 2.0]))
    return {n: float(_sigmoid(np.array([math.log(budget / (b_p * n)) + fit.x[3] * math.log(n / n0)]),
                              r0, *fit.x[:3])[0]) for n in curves}


def read_forward(curves: Mapping[int, Curve], b_p: int, budget: float, method: str, reading: str = "best") -> dict[int, float]:
    """Each n's predicted value at ``budget`` by ``method`` (``METHODS``) from one seed's cheap curves."""
    check_reading(reading)
    if method == "level":
        return {n: (_positive(c)[-1][1] if _positive(c) else _r0(curves)) for n, c in curves.items()}
    if method == "best-level":
        return {n: (max(v for _, v in _positive(c)) if _positive(c) else _r0(curves)) for n, c in curves.items()}
    if method == "steps-near":
        return steps_pooled(curves, b_p, budget, reading, near=True)
    if method == "lc-sigmoid":
        return lc_sigmoid(curves, budget)
    if method in ("steps", "steps-offset"):
        return steps_pooled(curves, b_p, budget, reading, offset=method == "steps-offset")
    if method == "steps-sigmoid":
        return steps_sigmoid(curves, b_p, budget)
    raise IsosimError(f"method must be one of {', '.join(METHODS)}, got {method!r}")


PICK_RULES = ("max", "band-top", "band-mid")


def eval_noise(value: float, eval_samples: int | None) -> float:
    """Sampling sd of one evaluation of pass rate ``value`` over ``eval_samples`` answers (V x N;
    ``DEFAULT_EVAL_SAMPLES`` when unknown)."""
    k = eval_samples or DEFAULT_EVAL_SAMPLES
    v = min(max(value, 1e-3), 1 - 1e-3)
    return math.sqrt(v * (1 - v) / k)


DEFAULT_EVAL_SAMPLES = 2400


def pick(values: Mapping[int, float], rule: str = "max", z: float = 2.0, eval_samples: int | None = None) -> int:
    """The pick from predicted values: ``max`` the highest (ties to the smaller n); ``band-top``
    the largest n within ``z`` evaluation sds (:func:`eval_noise`) of the highest (the n that
    reaches the plateau in the fewest updates); ``band-mid`` that band's middle n (lower median)."""
    best = max(values, key=lambda n: (values[n], -n))
    if rule == "max":
        return int(best)
    if rule not in PICK_RULES:
        raise IsosimError(f"pick rule must be one of {', '.join(PICK_RULES)}, got {rule!r}")
    tol = z * eval_noise(values[best], eval_samples)
    band = sorted(n for n, v in values.items() if v >= values[best] - tol)
    return int(band[-1] if rule == "band-top" else band[(len(band) - 1) // 2])


def predict(by_seed: Mapping[int, Mapping[int, Curve]], b_p: int, budget: float, method: str,
            reading: str = "best", eval_samples: int | None = None,
            read: Callable[[Mapping[int, Curve]], dict[int, float]] | None = None) -> dict[str, Any]:
    """The pick from every seed's cheap runs (``by_seed[seed][n]``): each n's predicted value at
    ``budget``, seed-mean, its expected regret (best predicted mean minus its own) with its
    standard error (the seed spread of the difference, at least that of two evaluations'
    sampling noise, :func:`eval_noise`, over the seeds), the tie band (expected regret within 2 se).
    ``read``: a reader of one seed's curves in place of ``method``'s (:mod:`isosim.predict.sbi`)."""
    if not by_seed:
        raise IsosimError("no cheap runs to read")
    per_seed = {s: (read(c) if read else read_forward(c, b_p, budget, method, reading)) for s, c in by_seed.items()}
    ns = sorted(set.intersection(*(set(v) for v in per_seed.values())))
    if not ns:
        raise IsosimError("no n was run under every seed")
    vals = np.array([[per_seed[s][n] for n in ns] for s in sorted(per_seed)])
    mean = vals.mean(axis=0)
    k = vals.shape[0]
    se = vals.std(axis=0, ddof=1) / math.sqrt(k) if k > 1 else np.full(len(ns), np.nan)
    chosen = pick(dict(zip(ns, mean)))
    i_best = ns.index(chosen)
    regret = {n: float(mean[i_best] - mean[i]) for i, n in enumerate(ns)}
    # regret uncertainty: the seed spread of the difference to the pick
    floor = math.sqrt(2) * eval_noise(float(mean[i_best]), eval_samples) / math.sqrt(k)
    diff_se = {n: max(floor, float(np.std(vals[:, i_best] - vals[:, i], ddof=1) / math.sqrt(k)) if k > 1 else 0.0)
               for i, n in enumerate(ns)}
    band = [n for n in ns if regret[n] <= 2 * diff_se[n] + 1e-12]
    return {"method": method, "reading": reading, "budget": float(budget), "b_p": int(b_p), "seeds": sorted(per_seed),
            "eval_samples": eval_samples or DEFAULT_EVAL_SAMPLES,
            "pick": chosen, "tie_band": band,
            "n": {str(n): {"value": float(mean[i]), "value_se": float(se[i]), "expected_regret": regret[n],
                           "expected_regret_se": diff_se[n], "steps_at_budget": float(budget / (b_p * n))}
                  for i, n in enumerate(ns)}}
