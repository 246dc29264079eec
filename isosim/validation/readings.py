"""The two readings of a run at a budget C, named wherever a run's value at C is scored.

- ``best``: the best validated value up to C, the record-breaking frontier that ``isosim
  analyze``'s n* reads (a user who keeps the best checkpoint gets it).
- ``final``: the value at C, the last checkpoint of a run trained to C.

Both interpolate a run's evaluations linearly in ln rollouts (``best`` takes the larger of the
interpolated value at C and every evaluation before it). A run that ends more than ``rtol`` short
of C has no value there (NaN). The module sits below :mod:`isosim.predict` (which names the
readings) and imports nothing of :mod:`isosim.validation`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from isosim.errors import IsosimError

READINGS = ("best", "final")
HEADLINE = "best"
Curve = Sequence[tuple[float, float]]


def final_at(curve: Curve, budget: float, rtol: float = 0.01) -> float:
    """The value at ``budget``: linear in ln rollouts between evaluations; a run ending within
    ``rtol`` short of the budget counts at its last point; NaN if it ends earlier (what
    :func:`isosim.validation.adaptive.value_at` reads)."""
    pts = [(float(r), float(v)) for r, v in curve if r > 0]
    if not pts or pts[-1][0] < budget * (1 - rtol):
        return float("nan")
    if budget >= pts[-1][0]:
        return pts[-1][1]
    if budget <= pts[0][0]:
        return pts[0][1]
    return float(np.interp(math.log(budget), np.log([p[0] for p in pts]), [p[1] for p in pts]))


def check_reading(reading: str) -> str:
    if reading not in READINGS:
        raise IsosimError(f"reading must be one of {', '.join(READINGS)}, got {reading!r}")
    return reading


def value_at(curve: Curve, budget: float, reading: str = HEADLINE, rtol: float = 0.01) -> float:
    """A run's value at ``budget`` rollouts in ``reading`` (see the module docstring)."""
    check_reading(reading)
    last = final_at(curve, budget, rtol)
    if reading == "final" or not math.isfinite(last):
        return last
    before = [float(v) for r, v in curve if 0 < r <= budget * (1 + 1e-9) and math.isfinite(v)]
    return max([last, *before])


def truth_at(runs: Mapping[int, Mapping[int, Curve]], budget: float, reading: str = HEADLINE) -> dict[str, Any]:
    """Seed-mean value per n at ``budget`` (``runs[n][seed]``) in ``reading``, the best n, the
    standard error of a seed mean (seed spread pooled over n) and the tie band (n within 2 se of
    the best); :func:`isosim.validation.adaptive.truth_at` is its final reading."""
    check_reading(reading)
    means, devs, dof, k = {}, 0.0, 0, 0
    for n, seeds in runs.items():
        vals = np.array([value_at(c, budget, reading) for c in seeds.values()])
        vals = vals[np.isfinite(vals)]
        if not len(vals):
            continue
        means[int(n)] = float(vals.mean())
        if len(vals) > 1:
            devs += float(((vals - vals.mean()) ** 2).sum())
            dof += len(vals) - 1
            k = max(k, len(vals))
    if not means:
        raise IsosimError(f"no run reaches {budget:.0f} rollouts")
    sd = math.sqrt(devs / dof) if dof else float("nan")
    se = sd / math.sqrt(k) if dof else float("nan")
    best = max(means, key=lambda n: (means[n], -n))
    band = sorted(n for n, v in means.items() if v >= means[best] - 2 * se) if dof else [best]
    return {"budget": float(budget), "reading": reading, "mean": {str(n): means[n] for n in sorted(means)},
            "best": best, "seed_sd": sd, "seed_se": se, "tie_band": band}


def regret(truth: Mapping[str, Any], chosen: int) -> dict[str, Any]:
    """The pick's regret in ``truth``'s reading: the best n's seed mean minus the pick's, beside
    the seed noise (within 2 se or not)."""
    r = truth["mean"][str(truth["best"])] - truth["mean"][str(int(chosen))]
    se = truth["seed_se"]
    return {"reading": truth["reading"], "regret": float(r), "seed_se": float(se),
            "within_2se": bool(r <= 2 * se + 1e-12), "in_tie_band": int(chosen) in truth["tie_band"]}


def difference_se(runs: Mapping[int, Mapping[int, Curve]], budget: float, weights: Mapping[int, float],
                  reading: str = HEADLINE) -> dict[str, Any]:
    """A sum of seed means, ``sum_n weights[n] x mean_n`` at ``budget`` in ``reading`` (a gap
    between two n: weights +1 and -1), with its standard error: each seed mean's se is the seed
    spread pooled over n (:func:`truth_at`'s) over the root of that n's own number of seeds, and the
    seed means are independent, so the se is sqrt(sum_n weights[n]^2 se_n^2). A gap between two n
    of as many seeds has sqrt(2) times the se of one seed mean. ``in_se``: the sum over that se."""
    truth = truth_at(runs, budget, reading)
    counts = {int(n): int(np.isfinite([value_at(c, budget, reading) for c in seeds.values()]).sum())
              for n, seeds in runs.items()}
    missing = [int(n) for n in weights if not counts.get(int(n))]
    if missing:
        raise IsosimError(f"no run of n = {missing} reaches {budget:.0f} rollouts")
    value = float(sum(w * truth["mean"][str(int(n))] for n, w in weights.items()))
    se = float(truth["seed_sd"] * math.sqrt(sum(w * w / counts[int(n)] for n, w in weights.items())))
    return {"budget": float(budget), "reading": reading, "value": value, "se": se,
            "seed_se": float(truth["seed_se"]), "in_se": value / se if se > 0 else float("nan")}
