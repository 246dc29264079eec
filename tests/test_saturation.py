"""Saturation that holds on seeds nobody tuned on: the default presets at explore's full scale.

``isosim explore --preset easy|hard`` with defaults (n 8..2048 / 8..512, B_p 32, 1e7 rollouts, 2
seeds) on a held-out seed. The presets were tuned on seeds 11-19 (``--seed 11`` .. ``--seed 18``
with 2 seeds each) and 21-62 (``--seed 21, 31, 41, 51, 61``: a first check whose failures on seed
41 changed the easy recipe); :data:`SEED` is not among them. ``studies/paper/saturation.py`` reads five
held-out seeds (71, 81, 91, 121, 131). Each claim has a failing control: the same
sweep with the claim's mechanism switched off fails the same criterion.

n*(C) is read on the budgets where the sweep learns (a gain over the base reward beyond the
run-to-run noise: the budgets the n*(C) fit uses); below them every n is at the base reward and
the argmax is noise.
"""

from __future__ import annotations

import functools

import pytest

from isosim.frontier import analysis
from isosim.predict import fidelity as F
from isosim.sweeps import sweep

SEED = 71  # held out (tuning: 11-19, then 21-62 while choosing the easy KL and interference strength)
RHO_MIN = 0.7


@functools.lru_cache(maxsize=8)
def frontier(preset: str, tmp: str, **overrides) -> dict:
    plan = sweep.plan_for_preset(preset, "q1", seeds=2, seed=SEED, **overrides)
    df = sweep.run_sweep(plan, f"{tmp}/{preset}-{sorted(overrides.items())}")
    t = F.nstar_trend(analysis.analyze(df, metric="val_avg", n_boot=100, seed=SEED))
    learning = [(b, n) for b, n, ok in zip(t["budgets"], t["n_star"], t["learning"]) if ok]
    return {"n_max": max(int(n) for n in df["n"].unique()), "rho": t["spearman_learning"] or 0.0,
            "n_sat": t["n_sat"], "ci": t["n_sat_ci"], "n_star": [n for _, n in learning],
            "budgets": [b for b, _ in learning]}


@pytest.fixture(scope="module")
def tmp(tmp_path_factory):
    return str(tmp_path_factory.mktemp("saturation"))


@pytest.mark.parametrize("case,overrides", [("on", {}), ("off: no interference (memorize 0)", {"memorize": 0.0})])
def test_easy_n_star_rises_and_saturates_inside_the_grid(tmp, case, overrides):
    f = frontier("easy", tmp, **overrides)
    holds = (f["rho"] >= RHO_MIN and f["n_sat"] is not None and f["n_sat"] < f["n_max"]
             and f["ci"][1] < f["n_max"] * 0.99)
    assert holds == (case == "on"), f


@pytest.mark.parametrize("case,overrides", [("on", {}), ("off: no weight decay", {"wd": 0.0})])
def test_hard_n_star_rises_and_saturates_below_easy(tmp, case, overrides):
    easy, hard = frontier("easy", tmp), frontier("hard", tmp, **overrides)
    holds = hard["rho"] >= RHO_MIN and hard["n_sat"] is not None and hard["n_sat"] < easy["n_sat"]
    assert holds == (case == "on"), (hard, easy["n_sat"])


def test_hard_stays_at_or_below_easy_at_every_learning_budget(tmp):
    """F2 as a lower plateau within the grid: at no budget where both learn does the hard set's n*
    exceed the easy set's, and at the top budget it is strictly lower."""
    easy, hard = frontier("easy", tmp), frontier("hard", tmp)
    e = dict(zip(easy["budgets"], easy["n_star"]))
    both = [(b, n, e[b]) for b, n in zip(hard["budgets"], hard["n_star"]) if b in e]
    assert both and all(h <= x for _, h, x in both), both
    assert both[-1][1] < both[-1][2], both
