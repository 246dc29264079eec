"""Scoring the search on a committed sweep: the sweep's runs, the seed-mean truth and noise at a
budget, and every seed replayed at every budget against it."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from isosim.errors import IsosimError
from isosim.validation import readings
from isosim.validation.adaptive.curves import Curve, value_at
from isosim.validation.adaptive.replay import REFERENCES, informed_choice, replay, successive_halving
from isosim.validation.adaptive.rules import Settings, spread_start

SH_FIRST_RUNG = 1 / 16
"""the successive-halving baseline's first rung (its rungs: C / 16, C / 8, ...)"""
SH_CHEAP = "successive halving (adaptive's rungs)"
"""name of the extra column: successive halving on the adaptive policy's rungs (C / 32, ...)"""

MIN_STEPS = 20
"""updates a run must get at the budget to be in the grid (``isosim validate``'s default)"""


def truth_at(runs: Mapping[int, Mapping[int, Curve]], budget: float) -> dict[str, Any]:
    """Seed-mean value per n at ``budget`` (``runs[n][seed]``), the best n, the standard error of
    a seed-mean (pooled over n) and the tie band (n within 2 standard errors of the best), in the
    ``final`` reading (:func:`isosim.validation.readings.truth_at`)."""
    out = readings.truth_at(runs, budget, "final")
    out.pop("reading")
    return out



def load_sweep(folder: str | Path, metric: str = "val_avg") -> dict[str, Any]:
    """A sweep folder of ``nN_bpB_sS/records.jsonl`` runs: ``runs[n][seed]`` curves, B_p, the
    largest budget and the validation size (V x N) from the runs' records."""
    import json

    runs: dict[int, dict[int, list[tuple[float, float]]]] = {}
    b_ps, samples, top = set(), set(), []
    for rec in sorted(Path(folder).glob("*/records.jsonl")):
        rows = []
        for line in rec.read_text(encoding="utf-8").splitlines():
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError:
                continue
        rows = [r for r in rows if r.get(metric) is not None]
        if not rows:
            raise IsosimError(f"{rec}: no records with {metric}")
        n, seed = int(rows[0]["n"]), int(rows[0]["seed"])
        runs.setdefault(n, {})[seed] = sorted((float(r["rollouts"]), float(r[metric])) for r in rows)
        b_ps.add(int(rows[0]["b_p"]))
        top.append(float(rows[0].get("budget") or rows[-1]["rollouts"]))
        if rows[0].get("val_size") and rows[0].get("eval_n"):
            samples.add(int(rows[0]["val_size"]) * int(rows[0]["eval_n"]))
    if not runs:
        raise IsosimError(f"{folder}: no run folders with records.jsonl")
    if len(b_ps) != 1:
        raise IsosimError(f"{folder}: runs of several B_p {sorted(b_ps)}; a sweep compares n at one B_p")
    return {"runs": runs, "b_p": b_ps.pop(), "max_budget": min(top),
            "eval_samples": min(samples) if samples else None, "seeds": sorted({s for v in runs.values() for s in v})}


def grid_at(ns: Sequence[int], budget: float, b_p: int, min_steps: int = MIN_STEPS) -> list[int]:
    return sorted(n for n in ns if budget // (b_p * n) >= min_steps)


def seed_replays(sweep: Mapping[str, Any], budgets: Sequence[float], min_steps: int = MIN_STEPS):
    """(budget, grid, truth, seed, that seed's curves) for every budget and every seed that has a
    run of every grid n there: what one replay sees and what it is scored against."""
    for budget in budgets:
        grid = grid_at(list(sweep["runs"]), budget, sweep["b_p"], min_steps)
        truth = truth_at({n: sweep["runs"][n] for n in grid}, budget)
        for seed in sweep["seeds"]:
            full = {n: sweep["runs"][n][seed] for n in grid if seed in sweep["runs"][n]}
            if sorted(full) == grid:
                yield budget, grid, truth, seed, full


def _scored(truth: Mapping[str, Any], budget: float, seed: int, policy: str, chosen: int, overhead: float,
            tried: list[int]) -> dict[str, Any]:
    """One replay's row: the chosen n's regret at C against the sweep's best, beside the seed noise."""
    regret = truth["mean"][str(truth["best"])] - truth["mean"][str(chosen)]
    return {"budget": float(budget), "seed": int(seed), "policy": policy, "chosen": int(chosen),
            "best": truth["best"], "tie_band": truth["tie_band"], "regret": regret,
            "seed_se": truth["seed_se"], "regret_over_se": regret / truth["seed_se"] if truth["seed_se"] > 0 else float("nan"),
            "within_2se": bool(regret <= 2 * truth["seed_se"] + 1e-12), "overhead": float(overhead), "tried": tried}


def score_sweep(sweep: Mapping[str, Any], budgets: Sequence[float], predicted: Callable[[float], int | None] | None = None,
                min_steps: int = MIN_STEPS) -> list[dict[str, Any]]:
    """Replay every seed at every budget: the adaptive policy started at the prediction (if any)
    and at the grid spread, successive halving, and one run at the predicted n; each scored by
    regret at C (seed-mean of the best n minus that of the chosen n) against the seed noise."""
    rows = []
    for budget, grid, truth, seed, full in seed_replays(sweep, budgets, min_steps):
        pred = predicted(budget) if predicted else None
        pred_n = min(grid, key=lambda n: (abs(math.log2(n) - math.log2(pred)), n)) if pred else None
        policies = {}
        if pred_n is not None:
            policies["adaptive (prediction)"] = replay(full, Settings(
                budget=budget, grid=tuple(grid), start=tuple(spread_start(grid, pred_n)),
                eval_samples=sweep["eval_samples"]))
            policies["one run at the predicted n"] = {"chosen": pred_n, "overhead": 0.0}
        policies["adaptive (spread)"] = replay(full, Settings(
            budget=budget, grid=tuple(grid), start=tuple(spread_start(grid)), eval_samples=sweep["eval_samples"]))
        policies["successive halving"] = successive_halving(full, Settings(
            budget=budget, grid=tuple(grid), start=tuple(grid), eval_samples=sweep["eval_samples"],
            first_rung=SH_FIRST_RUNG))
        # an extra column, not the baseline: the same halving on the adaptive policy's cheaper rungs
        policies[SH_CHEAP] = successive_halving(full, Settings(
            budget=budget, grid=tuple(grid), start=tuple(grid), eval_samples=sweep["eval_samples"]))
        for name, res in policies.items():
            rows.append(_scored(truth, budget, seed, name, res["chosen"], res["overhead"],
                                res.get("tried", sorted(res.get("spent", {})))))
    return rows


def score_references(sweep: Mapping[str, Any], budgets: Sequence[float], min_steps: int = MIN_STEPS) -> list[dict[str, Any]]:
    """:data:`REFERENCES` scored like :func:`score_sweep`'s policies, every seed at every budget:
    how much of the regret any reading of the curves up to C / 2 (or C / 4) can remove."""
    rows = []
    for budget, _grid, truth, seed, full in seed_replays(sweep, budgets, min_steps):
        for name, (frac, reading) in REFERENCES.items():
            res = informed_choice(full, budget, frac, reading)
            rows.append(_scored(truth, budget, seed, name, res["chosen"], res["overhead"], sorted(full)))
    return rows


def default_budgets(max_budget: float, lo: float = 64.0, k: int = 25) -> list[float]:
    """The frontier analysis' budget grid of a sweep: ``k`` log-spaced budgets from ``lo``."""
    return [float(b) for b in np.geomspace(lo, max_budget, k)]
