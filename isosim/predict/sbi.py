"""A simulation-trained reader of cheap parts (``sbi``): LC-PFN's recipe with isosim as the prior.

A bank of simulated sweeps drawn from a broad prior over the simulator's settings (training-set
size, difficulty profile, learning rate, skill transfer, memorisation, typicality; the bank is
written by ``studies/scoring/sbi_bank.py``) supplies examples: at each budget C of a sweep's grid,
the cheap part (every n run to ``share`` C, each evaluation given the sampling noise of
``EVAL_SAMPLES`` answers) and each n's regret at C in the ``best`` reading (the best value up to C
of that n against the best n's), as a share of the best n's gain from step 0. Each n of a cheap
part is described scale-free (:func:`features`); a k-nearest-neighbour regression over the bank's
examples gives each n's expected relative regret, and the pick is the n where it is lowest.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from isosim.errors import IsosimError

Curve = Sequence[tuple[float, float]]
EVAL_SAMPLES = 2400
K_NEIGHBOURS = 25
MIN_STEPS = 20
OUT_OF_BAND = 10.0
"""how far (in relative regret) an n outside the cheap leader's band is put below every n in it"""
BANDS = {"sbi": None, "sbi-band": 2.0, "sbi-band1": 1.0}
"""the readers: alone, or choosing only among the n within z evaluation sds of the cheap leader"""


def _pos(c: Curve) -> list[tuple[float, float]]:
    return [(float(r), float(v)) for r, v in c if r > 0 and math.isfinite(v)]


def features(curves: Mapping[int, Curve], b_p: int, budget: float) -> dict[int, np.ndarray]:
    """Per n: log2 n against the cheap leader's, its last and best values against the leader's (as
    shares of the leader's gain from step 0), log2 of its updates at C and in the cheap part, and
    its last rise per e-fold of rollouts (the same share)."""
    zero = [float(v) for c in curves.values() for r, v in c if r <= 0 and math.isfinite(v)]
    last = {n: (_pos(c)[-1][1] if _pos(c) else float("nan")) for n, c in curves.items()}
    if not zero or not any(math.isfinite(v) for v in last.values()):
        raise IsosimError("the cheap part needs step-0 evaluations and one evaluation past it")
    r0 = float(np.mean(zero))
    lead = max((n for n in last if math.isfinite(last[n])), key=lambda n: (last[n], -n))
    gain = max(last[lead] - r0, 1e-3)
    best = {n: max([v for _, v in _pos(c)] or [r0]) for n, c in curves.items()}
    top = max(best.values())
    out = {}
    for n, c in curves.items():
        p = _pos(c)
        slope = 0.0
        if len(p) >= 2 and p[-1][0] > p[-2][0]:
            slope = (p[-1][1] - p[-2][1]) / math.log(p[-1][0] / p[-2][0])
        out[n] = np.array([math.log2(n) - math.log2(lead), ((last[n] if math.isfinite(last[n]) else r0) - last[lead]) / gain,
                           (best[n] - top) / gain, math.log2(budget / (b_p * n)),
                           math.log2(max(p[-1][0] / (b_p * n), 1.0)) if p else 0.0, slope / gain])
    return out


def _best_at(curve: Curve, budget: float) -> float:
    vals = [v for r, v in curve if 0 < r <= budget * (1 + 1e-9)]
    return max(vals) if vals else float("nan")


def _reveal(curve: Curve, target: float) -> list[tuple[float, float]]:
    out = []
    for r, v in curve:
        if r > target * (1 + 1e-9) and any(p[0] > 0 for p in out):
            break
        out.append((r, v))
    return out


def examples(bank: Sequence[Mapping[str, Any]], share: float, seed: int = 0, b_p: int = 16,
             budgets: Sequence[float] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(features, relative regret) rows of every bank sweep, budget and n."""
    rng = np.random.default_rng(seed)
    xs, ys = [], []
    for sw in bank:
        curves = {int(n): [tuple(p) for p in c] for n, c in sw["curves"].items()}
        top = min(c[-1][0] for c in curves.values())
        for budget in budgets or [float(b) for b in np.geomspace(64, top, 25) if b >= 2e4]:
            grid = [n for n in curves if budget // (b_p * n) >= MIN_STEPS]
            if len(grid) < 2:
                continue
            truth = {n: _best_at(curves[n], budget) for n in grid}
            r0 = curves[grid[0]][0][1]
            best = max(truth.values())
            if not math.isfinite(best) or best - r0 < 0.02:
                continue  # no learning: nothing to choose
            cheap = {}
            for n in grid:
                c = _reveal(curves[n], share * budget)
                cheap[n] = [(r, v + (rng.normal(0, math.sqrt(max(v * (1 - v), 1e-4) / EVAL_SAMPLES)) if r > 0 else 0.0))
                            for r, v in c]
            for n, f in features(cheap, b_p, budget).items():
                xs.append(f)
                ys.append((best - truth[n]) / (best - r0))
    if not xs:
        raise IsosimError("the bank holds no sweep that learns")
    return np.array(xs), np.array(ys)


class Reader:
    """k-nearest-neighbour regression of relative regret on :func:`features` (standardised)."""

    def __init__(self, x: np.ndarray, y: np.ndarray, k: int = K_NEIGHBOURS) -> None:
        self.mu, self.sd = x.mean(axis=0), x.std(axis=0) + 1e-9
        self.x, self.y, self.k = (x - self.mu) / self.sd, y, k

    def regret(self, f: np.ndarray) -> tuple[float, float]:
        d = np.sqrt((((f - self.mu) / self.sd - self.x) ** 2).sum(axis=1))
        idx = np.argpartition(d, min(self.k, len(d) - 1))[: self.k]
        y = self.y[idx]
        return float(y.mean()), float(y.std(ddof=1) / math.sqrt(len(y))) if len(y) > 1 else float("nan")

    def read(self, curves: Mapping[int, Curve], b_p: int, budget: float, band_z: float | None = None,
             eval_samples: int | None = None) -> dict[int, float]:
        """Each n's predicted value relative to the best: minus its expected relative regret.
        ``band_z``: only the n whose last cheap value is within ``band_z`` evaluation sds of the
        cheap leader's are candidates (the others are put ``OUT_OF_BAND`` lower): the simulator
        breaks the ties the cheap part cannot."""
        out = {n: -self.regret(f)[0] for n, f in features(curves, b_p, budget).items()}
        if band_z is not None:
            from isosim.predict.stepcurve import eval_noise

            last = {n: (_pos(c)[-1][1] if _pos(c) else -math.inf) for n, c in curves.items()}
            top = max(last.values())
            tol = band_z * eval_noise(top, eval_samples)
            out = {n: (v if last[n] >= top - tol else v - OUT_OF_BAND) for n, v in out.items()}
        return out


_CACHE: dict[tuple, Reader] = {}


def reader(bank_path: str | Path, share: float, seed: int = 0) -> Reader:
    """The reader trained on the bank at ``bank_path`` for cheap parts of ``share`` C (cached)."""
    key = (str(bank_path), round(share, 6), seed)
    if key not in _CACHE:
        path = Path(bank_path)
        if not path.is_file():
            raise IsosimError(f"{path}: no bank of simulated sweeps (studies/scoring/sbi_bank.py writes it)")
        _CACHE[key] = Reader(*examples(json.loads(path.read_text()), share, seed))
    return _CACHE[key]
