"""What a long sweep says about the choice of n, in both readings (:mod:`isosim.validation.readings`).

For a sweep of runs ``runs[n][seed]`` (curves of (rollouts, value)) trained to a large budget:

- ``n*`` at chosen budgets, with the tie band (n within 2 seed se of the best) and the se;
- the path of n*(C) over a log grid of budgets (only where it changes);
- when larger n overtakes smaller n: for every pair, the budget from which the larger n's seed mean
  stays ahead up to the top budget; the headline ``crossing`` is that budget for the top budget's
  n* against every smaller n (``None`` when the smallest n is best at the top budget), and
  ``in_tie_band_from`` the budget from which that n stays within 2 seed se of the best (seed means
  of near-tied n cross back and forth; the tie band does not);
- the cheap runs' leader (every n run to a share of the top budget, the best last value, one seed's
  runs at a time, as the plane replays it) and its regret at the top budget, in seed se;
- the test of budget dependence (:func:`slope`): the least-squares slope of log2 n* against
  log10 C over the budgets of the n* table, with a seed-bootstrap interval (each n's seeds
  resampled with replacement, independently of the other n's);
- why n* moves or not (:func:`plateaus`): each n's peak, where it is reached, and every n's value
  at matched update steps. Larger n can only overtake by climbing higher, or by falling more
  slowly after the peak; if the peaks are tied and reached early, more budget cannot help it.

Used by ``python -m llm_runs.organism.f8 measure --readings`` for the long-budget organism sweeps.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from isosim.errors import IsosimError
from isosim.validation import readings as rd
from isosim.validation.adaptive.replay import informed_choice

Runs = Mapping[int, Mapping[int, rd.Curve]]


def seed_means(runs: Runs, budgets: Sequence[float], reading: str) -> dict[int, np.ndarray]:
    """Seed-mean value of each n at each budget (NaN where a seed has no value there)."""
    return {int(n): np.array([np.mean([rd.value_at(c, b, reading) for c in seeds.values()]) for b in budgets])
            for n, seeds in sorted(runs.items())}


def overtake_budget(small: np.ndarray, large: np.ndarray, budgets: Sequence[float]) -> float | None:
    """The first budget from which ``large`` stays strictly ahead of ``small`` to the last budget
    (``budgets[0]`` when it always leads; None when it is not ahead at the last budget)."""
    ahead = large > small
    if not ahead[-1]:
        return None
    behind = np.flatnonzero(~ahead)
    return float(budgets[0] if not len(behind) else budgets[behind[-1] + 1])


def measure(runs: Runs, at: Sequence[float], reading: str, share: float = 0.05, grid_points: int = 48,
            grid_from: float = 1e4) -> dict[str, Any]:
    """The long-sweep table in one reading (see the module docstring); ``at``: the budgets of the
    n* table, the last one the top budget at which the cheap leader is scored."""
    rd.check_reading(reading)
    top = float(at[-1])
    truths = [rd.truth_at(runs, b, reading) for b in at]
    table = [{"budget": float(b), "n_star": t["best"], "tie_band": t["tie_band"], "seed_se": t["seed_se"],
              "mean": t["mean"]} for b, t in zip(at, truths)]
    truth = truths[-1]  # at the top budget
    grid = [float(b) for b in np.geomspace(grid_from, top, grid_points)]
    means = seed_means(runs, grid, reading)
    ok = np.all([np.isfinite(m) for m in means.values()], axis=0)
    grid = [b for b, k in zip(grid, ok) if k]
    means = {n: m[ok] for n, m in means.items()}
    ns = sorted(means)
    stacked = np.array([means[n] for n in ns])
    path, last = [], None
    for j, b in enumerate(grid):
        n = ns[int(np.argmax(stacked[:, j]))]  # ties go to the smaller n, as truth_at's do
        if n != last:
            path.append({"from_budget": b, "n_star": n})
            last = n
    pairs = {f"{a}<{c}": overtake_budget(means[a], means[c], grid) for i, a in enumerate(ns) for c in ns[i + 1:]}
    n_top = table[-1]["n_star"]
    smaller = [pairs[f"{a}<{n_top}"] for a in ns if a < n_top]
    crossing = None if not smaller else (None if any(s is None for s in smaller) else max(smaller))
    in_band = [n_top in rd.truth_at(runs, b, reading)["tie_band"] for b in grid]
    out_band = [j for j, k in enumerate(in_band) if not k]
    settled = grid[0] if not out_band else (grid[out_band[-1] + 1] if out_band[-1] + 1 < len(grid) else None)
    seeds = sorted({s for v in runs.values() for s in v})
    leader = []
    for seed in seeds:
        full = {n: runs[n][seed] for n in ns if seed in runs[n]}
        pick = informed_choice(full, top, frac=1 / share, reading="level")["chosen"]
        r = rd.regret(truth, pick)
        leader.append({"seed": seed, "pick": int(pick), "regret": r["regret"],
                       "regret_in_se": r["regret"] / truth["seed_se"] if truth["seed_se"] > 0 else math.nan,
                       "within_2se": r["within_2se"]})
    return {"reading": reading, "n_star": table, "n_star_path": path, "grid": {"from": grid[0], "to": grid[-1],
            "points": len(grid)}, "overtakes": pairs, "crossing": crossing,
            "crossing_what": f"budget from which n = {n_top} (n* at {top:.3g}) leads every smaller n to {top:.3g}",
            "in_tie_band_from": settled,
            "in_tie_band_from_what": f"budget from which n = {n_top} is within 2 seed se of the best n at every "
                                     f"budget of the grid to {top:.3g} (the crossing without the seed noise)",
            "cheap_leader": {"share": share, "budget": share * top, "per_seed": leader,
                             "mean_regret": float(np.mean([x["regret"] for x in leader])),
                             "mean_regret_in_se": float(np.mean([x["regret_in_se"] for x in leader]))}}


def nstar_slope(budgets: Sequence[float], n_stars: Sequence[int]) -> float:
    """Least-squares slope of log2 n* against log10 C (octaves of n* per decade of budget)."""
    x, y = np.log10(np.asarray(budgets, float)), np.log2(np.asarray(n_stars, float))
    xc = x - x.mean()
    return float(xc @ (y - y.mean()) / (xc @ xc))


def seed_values(runs: Runs, budgets: Sequence[float], reading: str) -> tuple[list[int], list[np.ndarray]]:
    """The grid's n (ascending) and, per n, its seeds' values at each budget (seeds x budgets)."""
    ns = sorted(int(n) for n in runs)
    return ns, [np.array([[rd.value_at(c, b, reading) for b in budgets] for _, c in sorted(runs[n].items())])
                for n in ns]


def slope(runs: Runs, budgets: Sequence[float], reading: str, n_boot: int, rng: np.random.Generator,
          level: float = 0.95) -> dict[str, Any]:
    """:func:`nstar_slope` of the measured n*(C) (:func:`isosim.validation.readings.truth_at`'s best
    n at each budget) and its seed-bootstrap interval: ``n_boot`` resamples, each n's seeds drawn
    with replacement independently of the other n's, n* recomputed at every budget (ties to the
    smaller n, as ``truth_at``) and the slope refitted; the percentile interval at ``level``."""
    rd.check_reading(reading)
    if len(budgets) < 2:
        raise IsosimError("the slope of n*(C) needs at least two budgets")
    point_n = [rd.truth_at(runs, b, reading)["best"] for b in budgets]
    ns, vals = seed_values(runs, budgets, reading)
    if any(not np.all(np.isfinite(v)) for v in vals):
        raise IsosimError(f"every run must reach {max(budgets):.3g} rollouts for the slope's bootstrap")
    means = []
    for v in vals:  # each n's seeds resampled on their own
        idx = rng.integers(0, len(v), size=(n_boot, len(v)))
        means.append(v[idx].mean(axis=1))  # n_boot x budgets
    picks = np.asarray(ns)[np.argmax(np.stack(means), axis=0)]  # the first maximum: the smaller n
    x = np.log10(np.asarray(budgets, float))
    xc = x - x.mean()
    y = np.log2(picks.astype(float))
    slopes = (y - y.mean(axis=1, keepdims=True)) @ xc / (xc @ xc)
    tail = 100 * (1 - level) / 2
    lo, hi = np.percentile(slopes, [tail, 100 - tail])
    return {"point": nstar_slope(budgets, point_n), "n_star": [int(n) for n in point_n],
            "interval": [float(lo), float(hi)], "level": level, "resamples": int(n_boot),
            "share_above_zero": float(np.mean(slopes > 1e-12)), "share_zero": float(np.mean(np.abs(slopes) <= 1e-12)),
            "share_below_zero": float(np.mean(slopes < -1e-12)),
            "seeds_per_n": {str(n): int(len(v)) for n, v in zip(ns, vals)},
            "what": "least-squares slope of log2 n* against log10 C (octaves per decade) over "
                    + ", ".join(f"{b:.3g}" for b in budgets)}


def plateaus(runs: Runs, b_p: int, steps: Sequence[int] = (25, 50, 100, 200, 400, 800)) -> dict[str, Any]:
    """Each n's peak (best value up to and including its last record, seed mean, with the pooled
    seed se and the rollouts and update steps where each seed peaked), its last value, the n whose
    peaks are within 2 se of the highest, and every n's best value at matched update steps
    (``steps`` that every run reaches; steps are rollouts / (n * b_p)).

    Runs trained to one budget stop at whole steps, a step or so apart (n = 128 at B_p 16 at
    1,998,848 rollouts, n = 32 at 1,999,872): the top budget is the latest last record, and every
    run within the readings' ``rtol`` of it counts there with all its records, its last included."""
    ns = sorted(int(n) for n in runs)
    top = max(float(c[-1][0]) for seeds in runs.values() for c in seeds.values())
    peak = rd.truth_at(runs, top, "best")
    last = rd.truth_at(runs, top, "final")
    per_n = {}
    for n in ns:
        at = []
        for c in runs[n].values():
            pts = [(float(r), float(v)) for r, v in c if r > 0 and math.isfinite(v)]
            at.append(max(pts, key=lambda p: p[1])[0])  # the first record at the peak value
        per_n[str(n)] = {"peak": peak["mean"][str(n)], "last": last["mean"][str(n)],
                         "peak_rollouts": at, "peak_steps": [r / (n * b_p) for r in at],
                         "steps_at_top": max(float(c[-1][0]) for c in runs[n].values()) / (n * b_p)}
    by_steps = {n: {s: [(r / (n * b_p), v) for r, v in c] for s, c in seeds.items()} for n, seeds in runs.items()}
    reach = min(float(c[-1][0]) for seeds in by_steps.values() for c in seeds.values())
    matched = []
    for s in steps:
        if s > reach * (1 + 1e-9):
            break
        t = rd.truth_at(by_steps, float(s), "best")
        matched.append({"steps": int(s), "mean": t["mean"], "best": t["best"], "tie_band": t["tie_band"],
                        "seed_se": t["seed_se"]})
    hi = max(peak["mean"].values())
    return {"top_budget": top, "b_p": int(b_p), "per_n": per_n, "peak_seed_se": peak["seed_se"],
            "peak_spread": hi - min(peak["mean"].values()),
            "peaks_within_2se": [n for n in ns if peak["mean"][str(n)] >= hi - 2 * peak["seed_se"]],
            "matched_steps": matched}


def measure_both(runs: Runs, at: Sequence[float], share: float = 0.05) -> dict[str, Any]:
    """:func:`measure` in every reading, keyed by reading (the headline first)."""
    return {r: measure(runs, at, r, share) for r in (rd.HEADLINE, *[x for x in rd.READINGS if x != rd.HEADLINE])}
