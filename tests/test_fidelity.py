"""Each reproduced finding holds under its mechanism and fails with the mechanism switched off.

Small scales, seeded: isosim.predict.fidelity.QUICK (128 training problems, budget 3e5) and, for F1-F3,
isosim.predict.fidelity.TEST (128 problems, B_p 64, budget 4e6 but at most 7,800 steps per run).
Every test is parametrized: ``on`` asserts the finding, ``off`` names the setting where the same
criterion fails. Tuning used seeds 0-1; the held-out seeds are in ``test_f1_f2_held_out_seeds``.
Simulations are cached inside isosim.predict.fidelity, so tests that read the same sweep share it.

These are the mechanisms of the previous default presets, kept as ``easy-distance`` /
``hard-distance`` (Adam, KL + entropy on every set; the committed studies were measured with
them). The current defaults (the paper's per-set recipes) are tested in ``test_saturation.py``.
"""

from __future__ import annotations

import pytest

from isosim.predict import fidelity as F
from isosim.sim.presets import get_preset

QUICK = F.QUICK
TEST = F.TEST  # F1-F3: B_p 64, budget 4e6, n 8..512 (the hard set does not move within QUICK's 3e5)
OFF = F.with_seeds(TEST, (0,))  # off-cases need only fail; one seed keeps the suite short
EASY, HARD = "easy-distance", "hard-distance"  # the presets whose mechanisms these tests check
MARGIN_PP = 1.0  # a reproduced difference must be at least this large (points of the metric)


def _q1(preset, scale=TEST, **kw):
    return F.run_q1(preset, scale, **kw)


# --- F1: n*(C) rises and saturates; mechanism: KL pull + std-normalised groups ---------------
@pytest.mark.parametrize("case,overrides", [("on", {}), ("off: no KL", {"kl": 0.0})])
def test_f1_rise_and_saturation(case, overrides):
    s = F.score_f1(_q1(EASY, TEST if case == "on" else OFF, **overrides), TEST.budget)
    holds = s["holds"] and s["gain_over_min_pp"] >= MARGIN_PP
    assert holds == (case == "on"), s


# --- F2: hard saturates below easy; mechanism: distance (hard_loading) under bounded Adam steps --
@pytest.mark.parametrize("case,hard_overrides", [("on", {}), ("off: hard_loading 1", {"hard_loading": 1.0})])
def test_f2_hard_saturates_lower(case, hard_overrides):
    s = F.score_f2(_q1(EASY), _q1(HARD, TEST if case == "on" else OFF, **hard_overrides), TEST.budget)
    assert s["holds"] == (case == "on"), s


# --- F3: easy gains in worst@4 (sharpening), hard in best@4 (coverage) ------------------------
@pytest.mark.parametrize("case,profile", [("on: easy", EASY), ("off: hard", HARD)])
def test_f3_sharpening_on_easy(case, profile):
    g = F.metric_gains(_q1(profile), TEST.budget)
    assert (g["val_worst"]["gain_pp"] > g["val_best"]["gain_pp"] + MARGIN_PP) == case.startswith("on"), g


@pytest.mark.parametrize("case,profile", [("on: hard", HARD), ("off: easy", EASY)])
def test_f3_coverage_on_hard(case, profile):
    g = F.metric_gains(_q1(profile), TEST.budget)
    assert (g["val_best"]["gain_pp"] > g["val_worst"]["gain_pp"] + MARGIN_PP) == case.startswith("on"), g


# --- F4 theory: one tabular problem, plain stochastic PG: sequential beats parallel -------------
RECIPE_KEYS = ("kl", "entropy", "optimizer", "lr", "lr_rule", "adv", "wd")


@pytest.mark.parametrize("case", ["on: theory setting (plain PG, constant step)",
                                  "off: preset recipe (KL + std-normalised GRPO, Adam, sqrt lr)"])
def test_f4_theory_sequential_wins(case):
    recipe = {} if case.startswith("on") else {k: get_preset(HARD)[k] for k in RECIPE_KEYS}
    s = F.score_f4_theory(HARD, budget=1e4, n_values=(4, 64), seeds=tuple(range(8)), **recipe)
    assert s["holds"] == case.startswith("on"), s


# --- F5: B_p matters little next to n; mechanism: Adam's step does not scale with the gradient --
@pytest.mark.parametrize("case,preset", [("on: preset (Adam)", EASY), ("off: round-3 SGD recipe", "easy-kl")])
def test_f5_b_p_marginal(case, preset):
    s = F.score_f5(preset, QUICK, n_values=(4, 16, 64, 256))
    assert s["holds"] == case.startswith("on"), s


# --- F6: interference at matched compute; mechanism: a shared direction (typicality) -------------
@pytest.mark.parametrize("case,overrides", [
    ("on: linear policy + typicality 0.5", {"typicality": 0.5}),
    ("off: tabular policy (no shared parameters)", {"typicality": 0.5, "policy": "tabular"}),
])
def test_f6_fewer_stuck_with_large_n(case, overrides):
    s = F.score_f6(HARD, QUICK, epochs_hi=4, **overrides)
    assert s["holds"] == case.startswith("on"), {k: s[k] for k in ("stuck_diff_pp", "fewer_stuck", "closer_to_uniform")}


# --- F9: baseline ordering at B_p = 128 ---------------------------------------------------------
def test_f9_baseline_ordering():
    """On: n = 256 > (update 64, baseline 256) > n = 64 (QUICK seeds 0-7: 8 of 8). No setting
    tried switches the ordering off cleanly: under mean-only (Dr.GRPO) advantages it still holds
    on 5 of 8 seeds, at about half the spread. So the off case asserts that dose: the spread from
    n = 64 to n = 256 is smaller without the std normalisation."""
    on = F.score_f9(EASY, QUICK)
    off = F.score_f9(EASY, QUICK, adv="drgrpo")
    assert on["holds"], on
    spread = {name: s["val_avg_at_steps"]["n_hi"] - s["val_avg_at_steps"]["n_lo"] for name, s in (("on", on), ("off", off))}
    assert spread["on"] > 0.003, spread  # 0.3 pp at least
    assert spread["off"] < spread["on"], spread


def test_presets_state_their_mechanism():
    from isosim.sim import presets

    doc = presets.__doc__
    assert "Easy recipe" in doc and "Hard recipe" in doc and "restoring force" in doc and "saturates" in doc
    for name in ("easy", "hard", "extreme", "very-easy"):
        assert get_preset(name)["optimizer"] in ("sgd", "adam", "adamw")


# --- held-out seeds (tuning used seeds 0-1) ---------------------------------------------------
def test_f1_f2_f3_held_out_seeds():
    scale = F.with_seeds(TEST, (100,))
    easy, hard = F.run_q1(EASY, scale), F.run_q1(HARD, scale)
    f1 = F.score_f1(easy, scale.budget)
    assert f1["holds"] and f1["gain_over_min_pp"] >= MARGIN_PP, f1
    assert F.score_f2(easy, hard, scale.budget)["holds"]
    assert F.score_f3(easy, hard, scale.budget)["holds"]


# --- F7: a "base model" with a larger train-test gap saturates at a smaller n -----------------
# mechanism: a per-problem memorising part (tabular 3) fits the training set; weak (0.3): no cap
@pytest.mark.parametrize("case,model", [("on: tabular 3", F.MEMORISING_MODEL), ("off: tabular 0.3", {"tabular": 0.3})])
def test_f7_train_test_gap_caps_n_star(case, model):
    s = F.score_f7(EASY, TEST, model=model)  # the reference sweep is F1's, shared through the cache
    assert s["holds"] == case.startswith("on"), F.brief("F7", s)


# --- F10: hard-only training forgets easy problems; a 50/50 mix prevents it ---------------------
# mechanism: hard problems on clusters of their own share only the typicality direction with easy
# ones (F10_MODEL); off: typicality 0. At QUICK the hard validation set barely moves, so the
# "larger n wins on the mixes" part of F10 is measured by studies/paper/mixes.py (MEDIUM), not here.
F10_SCALE = F.Scale(**{**QUICK.__dict__, "n_values": (16, 128), "n_val": 128})  # 6 sweeps: ~10 s


@pytest.mark.parametrize("case,overrides", [("on", F.F10_MODEL), ("off: typicality 0", {**F.F10_MODEL, "typicality": 0.0})])
def test_f10_forgetting_and_mix(case, overrides):
    s = F.score_f10(F10_SCALE, **overrides)
    ok = s["forgets"] and s["mix_prevents"] and s["very_easy_helps_nothing"]
    assert ok == case.startswith("on"), F.brief("F10", s)


# --- F11: larger n also scores higher out of domain (train easy, validate on pass@1 5-20 %) ------
@pytest.mark.parametrize("case,overrides", [("on", {}), ("off: no KL", {"kl": 0.0})])
def test_f11_out_of_domain(case, overrides):
    s = F.score_f11(EASY, QUICK, **overrides)
    assert s["holds"] == (case == "on"), F.brief("F11", s)
