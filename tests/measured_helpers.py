"""The numbers the docs quote from an organism sweep's ``measured.json``, computed from it alone
(read-only): a gap between two n over the se of the DIFFERENCE of their seed means, and the regret of
a set of per-seed picks. Every ``seed_se`` there is the se of ONE seed mean (the seed spread pooled
over n, :func:`isosim.validation.readings.truth_at`); the se of a sum of seed means is
sqrt(sum_n w_n^2 se_n^2), with se_n = seed_se x sqrt(k / k_n) for an n of k_n seeds where the most is
k (:func:`isosim.validation.readings.difference_se` computes the same from the records)."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "studies" / "results"
BAR_BUDGETS = (1e5, 3e5, 1e6)


def load(rel: str) -> dict[str, Any]:
    return json.loads((RESULTS / rel).read_text())


def seeds_per_n(measured: Mapping[str, Any], reading: str) -> dict[int, int]:
    return {int(n): int(k) for n, k in measured["readings"][reading]["slope"]["seeds_per_n"].items()}


def sum_se(seed_se: float, weights: Mapping[int, float], seeds: Mapping[int, int]) -> float:
    """The se of sum_n weights[n] x mean_n, each seed mean's se ``seed_se`` x sqrt(k / k_n)."""
    k = max(seeds.values())
    return seed_se * math.sqrt(sum(w * w * k / seeds[int(n)] for n, w in weights.items()))


def gap_in_se(row: Mapping[str, Any], a: int, b: int, seeds: Mapping[int, int]) -> dict[str, float]:
    """mean_a - mean_b in a table row of ``measured.json`` (``mean``, ``seed_se``): the gap, in se of
    one seed mean and in se of the difference."""
    gap = row["mean"][str(a)] - row["mean"][str(b)]
    return {"gap": gap, "one": gap / row["seed_se"], "difference": gap / sum_se(row["seed_se"], {a: 1, b: -1}, seeds)}


def rule_gaps(measured: Mapping[str, Any]) -> dict[tuple[str, str, float], dict[str, float]]:
    """(reading, rule, budget) -> a fixed n = 8's regret (the best n's seed mean minus n = 8's), in
    both units, from the rule table (``rules``: the constant-lr sweep and its sqrt-rule twin, both of
    the same seeds per n)."""
    seeds = seeds_per_n(measured, "best")
    fixed = measured["rules"]["fixed_n"]
    return {(reading, r["rule"], float(r["budget"])): gap_in_se(r, r["best"], fixed, seeds)
            for reading in ("best", "final") for r in measured["rules"][reading]}


def weights_of(picks: Sequence[int], minus: int | None = None) -> dict[int, float]:
    """The mean of the picks' seed means (minus ``minus``'s) as weights on each n."""
    w: dict[int, float] = {}
    for n in picks:
        w[int(n)] = w.get(int(n), 0.0) + 1.0 / len(picks)
    if minus is not None:
        w[int(minus)] = w.get(int(minus), 0.0) - 1.0
    return {n: v for n, v in w.items() if abs(v) > 1e-12}


def row_at(measured: Mapping[str, Any], reading: str, budget: float) -> dict[str, Any]:
    return next(r for r in measured["readings"][reading]["n_star"] if r["budget"] == budget)


def gain_over_fixed(measured: Mapping[str, Any], reading: str, budget: float, picks: Sequence[int], fixed: int = 8,
                    seeds: Mapping[int, int] | None = None) -> tuple[float, float]:
    """The mean of ``picks``' seed means minus n = ``fixed``'s at ``budget`` in ``reading``, and that gain
    in se of the difference (0 where every pick is ``fixed``); ``seeds``: runs per n (default the reading's)."""
    row = row_at(measured, reading, budget)
    w = weights_of(picks, minus=fixed)
    gain = sum(v * row["mean"][str(n)] for n, v in w.items())
    seeds = seeds_per_n(measured, reading) if seeds is None else seeds
    return gain, (gain / sum_se(row["seed_se"], w, seeds) if w else 0.0)


def picks_scored(measured: Mapping[str, Any], picks: Mapping[str, Mapping[str, Sequence[int]]],
                 budgets: Sequence[float] = BAR_BUDGETS, fixed: int = 8) -> dict[str, Any]:
    """Per-seed picks (reading -> seed label -> one pick per budget) scored as the bar scores them:
    per cell, the mean over the seeds of the best n's seed mean minus the pick's; its gain over a
    fixed n = ``fixed`` in se of that difference (the mean of the picks' seed means minus n = 8's);
    and per reading the mean regret over the budgets in se of a difference of two seed means."""
    out: dict[str, Any] = {"cells": {}, "mean_in_se": {}}
    for reading, per_seed in picks.items():
        seeds = seeds_per_n(measured, reading)
        in_se = []
        for i, b in enumerate(budgets):
            row = row_at(measured, reading, b)
            cell = [int(p[i]) for p in per_seed.values()]
            best = max(row["mean"].values())
            regret = sum(best - row["mean"][str(n)] for n in cell) / len(cell)
            gain, gain_se = gain_over_fixed(measured, reading, b, cell, fixed, seeds)
            out["cells"][(reading, float(b))] = {
                "picks": cell, "regret": regret, "gain_over_fixed": gain, "gain_in_se": gain_se}
            in_se.append(regret / (row["seed_se"] * math.sqrt(2)))
        out["mean_in_se"][reading] = sum(in_se) / len(in_se)
    return out


def bar_gains(measured: Mapping[str, Any]) -> dict[tuple[str, float], float]:
    """(reading, budget) -> the lr-aware method's gain over a fixed n = 8 in the committed bar
    (``bar``: the mean over its per-seed picks), in se of that difference."""
    seeds = seeds_per_n(measured, "best")
    return {(r["reading"], float(r["budget"])): gain_over_fixed(measured, r["reading"], r["budget"], r["method"]["picks"],
                                                                seeds=seeds)[1]
            for r in measured["bar"]["rows"]}


def scored_in_se(measured: Mapping[str, Any], label: str, reading: str) -> list[float]:
    """A committed prediction's regret at each of its budgets (``predictions.scored``: the best n's
    seed mean minus the pick's) in se of that difference."""
    seeds = seeds_per_n(measured, reading)
    return [gap_in_se(row_at(measured, reading, s["budget"]), s["best_n"], s["pick"], seeds)["difference"]
            for s in measured["predictions"]["scored"] if s["label"] == label and s["reading"] == reading]


def summary_in_se(measured: Mapping[str, Any], label: str, reading: str) -> float:
    """Its mean over the budgets (``predictions.summary``'s ``mean_regret_in_se``, in se of a difference)."""
    got = scored_in_se(measured, label, reading)
    return sum(got) / len(got)


def bar_cells(measured: Mapping[str, Any], picks: Mapping[str, Mapping[str, Sequence[int]]]) -> dict[tuple[str, float], bool]:
    """(reading, budget) -> whether per-seed ``picks`` meet the committed bar there: a regret (mean
    over the seeds) no higher than a fixed n = 8's and than the cheap leader @5 %'s (``bar``'s rows)."""
    got = picks_scored(measured, picks)["cells"]
    out = {}
    for r in measured["bar"]["rows"]:
        mine = got[(r["reading"], float(r["budget"]))]["regret"]
        out[(r["reading"], float(r["budget"]))] = all(
            mine <= r[k]["regret"] + 1e-12 for k in measured["bar"]["compared_with"])
    return out
