"""recommend's choice of n and B_p on its simulated grid: one criterion for the pick and the tie band."""

import pytest

from isosim.predict import choice
from isosim.predict.recommend import certainty


def _read(values, noise=0.002, b_p=32, learning=True):
    """A read_grid-shaped result: cells (n, b_p) -> value at the top budget, one analysis per B_p."""
    cells = {(n, b_p): v for n, v in values.items()}
    res = {"budgets": [1e7], "n_star": [max(values, key=values.get)], "learning": [learning],
           "n_star_band": {"lo": [min(values)], "hi": [max(values)]}}
    return {"top": 1e7, "cells": cells, "analyses": {b_p: res}, "noise": noise}


def test_one_criterion_picks_the_smallest_n_within_two_se_of_the_best():
    # se of a seed mean .002 / sqrt(4) = .001; of a difference sqrt(2) x .001 = .00141; the band 2 se = .00283
    sure = certainty(_read({8: 0.60, 64: 0.724, 256: 0.7255, 2048: 0.726}), seeds=4)
    assert sure["pick"] == (64, 32) and sure["band_se"] == pytest.approx(0.001 * 2**0.5)
    assert [c["n"] for c in sure["tie_band"]] == [64, 256, 2048] and sure["indistinguishable"] == [256, 2048]
    assert sure["expected_regret"] == pytest.approx(0.002) and sure["expected_regret"] <= 2 * sure["band_se"]


def test_a_regret_beyond_two_se_is_outside_the_band_and_never_picked():
    """The hard preset at 3e6 once picked n = 8 at regret .0046 by a .005 tolerance while saying 2 se
    (.0044) separates n: one criterion now, so an n 2.1 se below the best is neither picked nor tied."""
    se_diff = 0.0022
    got = choice.pick_cell({(8, 32): 0.7000 - 0.0046, (16, 32): 0.7000, (32, 32): 0.6990}, se_diff)
    assert got["pick"] == (16, 32) and [c[0] for c in got["band"]] == [16, 32]
    assert all(r >= 0 for r in got["regret"].values())


def test_b_p_is_chosen_from_the_cells_as_well_as_n():
    got = choice.pick_cell({(8, 32): 0.60, (8, 128): 0.66, (16, 32): 0.50, (16, 128): 0.655}, 0.001)
    assert got["pick"] == (8, 128) and got["best"] == (8, 128)


def test_the_band_prints_as_a_set_not_a_range():
    assert choice.set_text([16, 2, 2]) == "{2, 16}"


def test_the_grid_runs_from_n_2_and_says_its_floor_and_ceiling():
    ns, bps = choice.sim_grid(65536)
    assert min(ns) == 2 == choice.N_FLOOR and max(ns) == 2048 == choice.N_CEIL and bps == list(choice.SIM_B_P)
    assert "from 2 (the floor) to 2048 (the ceiling)" in choice.grid_text(ns, bps, [(n, 32) for n in ns])
    ns, bps = choice.sim_grid(100)  # B_p 32 leaves only n = 2 under 100: B_p 8 is simulated as well
    assert bps[0] == choice.SMALL_B_P and 8 * 8 <= 100


def test_does_n_matter_names_the_worst_n_in_and_out_of_the_band():
    m = choice.matters_line({2: 0.08, 16: 0.0, 32: 0.002}, [16, 32], 0.002, 1e5, "n* rising", "simulator")
    assert m["matters"] and m["worst_n"] == 2 and m["worst_in_band"] == 32
    assert "40.0 se" in m["line"] and "inside the tie band {16, 32}" in m["line"] and "n* rising" in m["line"]
    flat = choice.matters_line({2: 0.001, 16: 0.0}, [2, 16], 0.002, 1e5, "n* not rising", "simulator")
    assert not flat["matters"] and flat["line"].startswith("does n matter at C = 1e+05? little")


def test_regime_reads_the_last_decade_of_n_star():
    b = [1e4, 3e4, 1e5, 3e5, 1e6]
    assert choice.regime(b, [4, 8, 16, 64, 128], [True] * 5)["regime"] == "rising"
    assert choice.regime(b, [4, 4, 4, 4, 4], [True] * 5)["regime"] == "saturated low"
    assert choice.regime(b, [4, 4, 4, 4, 4], [True] * 4 + [False])["regime"] == "no learning"


def test_recipe_is_read_from_the_simulated_config_and_the_measured_share():
    from isosim.predict.recommend import hard_share, simulated_recipe

    assert simulated_recipe({"kl": 1.0, "entropy": 0.01}) == "easy"
    assert simulated_recipe({"kl": 0.0, "entropy": 0.0}) == "hard"
    assert simulated_recipe({"kl": 0.3, "entropy": 0.0}) == "kl-only"
    # the share of hard problems is measured on the profile, never read from its name
    assert hard_share("hard:0.1,easy:0.9") < 0.5 <= hard_share("hard")


def test_a_mostly_easy_mix_gets_the_easy_recipe_and_reports_what_was_simulated(tmp_path, monkeypatch):
    from isosim.predict import recommend as rec

    monkeypatch.setenv("ISOSIM_CACHE", str(tmp_path))
    r = rec.recommend(2e4, preset="hard:0.1,easy:0.9", quick=True, seeds=1)
    assert (r.recipe, r.advised_recipe, r.recipe_mismatch) == ("easy", "easy", False)
    assert r.simulated_config["profile"] == "hard:0.1,easy:0.9" and r.simulated_config["kl"] > 0
    assert r.kl and r.entropy  # what was simulated, so what a run should use
    h = rec.recommend(2e4, preset="hard", quick=True, seeds=1)  # the hard preset simulates the hard recipe
    assert (h.recipe, h.advised_recipe, h.recipe_mismatch) == ("hard", "hard", False)
    assert not h.kl and not h.entropy and h.simulated_config["kl"] == 0 == h.simulated_config["entropy"]
    planted = rec.recommend(2e4, preset="hard-distance", quick=True, seeds=1)  # KL + entropy on a hard set
    assert planted.recipe == "easy" and planted.advised_recipe == "hard" and planted.recipe_mismatch
    assert "MISMATCH" in planted.reasons["kl"]


def test_recipe_of_a_mix_follows_its_share_of_hard_problems():
    from isosim.sim.presets import get_preset, recipe_for

    assert recipe_for("hard:0.5,easy:0.5") == "hard" == recipe_for("hard:0.5,easy:0.25,very-easy:0.25")
    assert recipe_for("hard:0.1,easy:0.9") == "easy"
    for name in ("hard", "extreme", "hard:0.5,easy:0.5"):  # the paper's hard recipe: neither term
        assert get_preset(name)["kl"] == 0 == get_preset(name)["entropy"], name
    for name in ("easy", "very-easy", "hard:0.1,easy:0.9"):
        assert get_preset(name)["kl"] > 0 and get_preset(name)["entropy"] > 0, name


def test_n_sat_is_reported_only_when_saturated_a_decade_before_the_budget():
    from isosim.predict.recommend import saturated_by

    # n*(C) rising through 1e5: at 1e6 its plateau (64) was reached by 1e5; at 1e5 it was not
    fit = {"n_sat": 64.0, "n_low": 4.0, "log_c_mid": 4.0, "slope": 4.0, "saturated": True}
    assert saturated_by({"fit": fit}, 1e6) is True
    assert saturated_by({"fit": fit}, 1e5) is False
    assert saturated_by({"fit": {**fit, "saturated": False}}, 1e9) is False
    assert saturated_by({"fit": {**fit, "n_sat": None}}, 1e6) is None


def test_track_record_is_read_from_the_scoreboard(tmp_path):
    import json

    from isosim.predict.recommend import track_record

    doc = {"sweeps": {"easy-3200": {"n_best_raw": [4, 4], "predictors": {"isosim_profile": {
        "n_pick": 16, "regret": 0.065, "noise": 0.009, "octaves_max": 2}},
        "predictors_best": {"isosim_profile": {"n_pick": 16, "regret": 0.048, "noise": 0.012}}}}}
    (tmp_path / "sb.json").write_text(json.dumps(doc))
    assert track_record(tmp_path / "sb.json") == [{"sweep": "easy-3200", "n_pick": 16, "n_best": 4, "regret": 0.065,
                                                   "noise": 0.009, "octaves_max": 2, "regret_best": 0.048,
                                                   "noise_best": 0.012}]
    # both readings are named on the terminal
    from isosim.predict.recommend import track_record_lines

    lines = track_record_lines(track_record(tmp_path / "sb.json"))
    assert "0.0480 in the best reading" in lines[0] and "0.0650 in the final reading" in lines[0]
    assert track_record(tmp_path / "missing.json") == []


def test_recommend_and_validate_dry_run_agree_for_one_training_set_size(tmp_path):
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    env = {**os.environ, "ISOSIM_CACHE": str(tmp_path / "cache"), "PYTHONPATH": str(root)}
    rec = subprocess.run([sys.executable, "cli.py", "recommend", "--budget", "20000", "--quick", "--train-size", "500",
                          "--json"], cwd=root, capture_output=True, text=True, env=env)
    assert rec.returncode == 0, rec.stderr[-2000:]
    r = json.loads(rec.stdout)
    assert r["train_size"] == 500 and r["train_size_source"] == "given"
    data = tmp_path / "d.jsonl"
    data.write_text('{"id": "a", "problem": "1+1", "answer": "2"}\n')
    val = subprocess.run([sys.executable, "cli.py", "validate", "--model", "some-org/some-model", "--data", str(data), "--budget",
                          "20000", "--preset", "easy", "--quick", "--train-size", "500", "--dry-run", "--n-boot", "0",
                          "--out", str(tmp_path / "val")], cwd=root, capture_output=True, text=True, env=env)
    assert val.returncode == 0, val.stderr[-2000:]
    first = next(line for line in val.stdout.splitlines() if line.startswith("prediction"))  # after the start line
    assert f"n*(C=20000) = {r['predicted']['n_star'][-1]}," in first and "training-set size 500 (--train-size)" in first
    text = subprocess.run([sys.executable, "cli.py", "recommend", "--budget", "20000", "--quick", "--train-size", "500"],
                          cwd=root, capture_output=True, text=True, env=env).stdout
    assert "training-set size simulated: 500 (given)" in text and "uncalibrated" in text
    assert "profile-only picked n" in text  # the committed scoreboard's track record


def test_the_saturation_words_agree_within_one_answer():
    """hard at 1e9 (read at the bank's cap, 1e7): the fit's upper level (34) lies inside the grid but is not
    reached by C / 10, so n_sat is none for that reason, not "where the grid stops"; n* flat over the last
    decade is said as read per budget, not as a saturation."""
    from isosim.predict import recommend as rec

    j = rec.recommend(1e9, preset="hard").to_json()
    assert j["n_sat"] is None and "does not reach its upper level" in j["n_sat_reason"]
    assert "where the grid stops" not in j["n_sat_reason"]
    text = j["n_matters"]["line"]
    assert "not rising over the last decade" in text and "saturated" not in text
