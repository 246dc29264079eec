"""recommend's choice of n near saturation, and its B_p rule."""

import pytest

from isosim.predict.recommend import NEAR_TIE, choose_b_p, smallest_near_optimal_n


def _result(asymptotes, budget=1e7):
    """An analysis-shaped result whose per-n curves are already flat at their asymptotes."""
    per_n = {str(n): dict(r0=a, a=a, log_c_mid=3.0, b=1.0, min_rollouts=32 * n, max_rollouts=budget)
             for n, a in asymptotes.items()}
    best = max(asymptotes, key=asymptotes.get)
    return {"budgets": [budget], "n_star": [best], "per_n": per_n}


def test_near_tie_picks_the_smallest_n():
    res = _result({8: 0.60, 64: 0.724, 256: 0.7255, 2048: 0.726})
    n, best, gap = smallest_near_optimal_n(res)
    assert (n, best) == (64, 2048) and -NEAR_TIE <= gap <= 0


def test_clear_winner_is_kept():
    res = _result({8: 0.60, 64: 0.70, 256: 0.72, 2048: 0.71})
    assert smallest_near_optimal_n(res)[:2] == (256, 256)


def test_b_p_rule_leaves_enough_steps_and_fits_b_max():
    b_p, _ = choose_b_p(n=64, budget=1e7, b_max=65536, problems=None)
    assert b_p == 256 and 1e7 // (b_p * 64) >= 100
    b_p, _ = choose_b_p(n=1024, budget=1e7, b_max=65536, problems=None)
    assert b_p * 1024 <= 65536
    b_p, why = choose_b_p(n=64, budget=1e5, b_max=65536, problems=None)
    assert b_p == 32 and "fewer than" in why


def test_recommends_n_is_the_frontiers_n_tol():
    """recommend's smallest near-optimal n is the n_tol that ``isosim explore`` / ``analyze`` report
    at their default tie tolerance: on records whose n at the top budget are .004 and .011 below the
    best, tolerances of .002, .005 and .02 give three different n_tol, and recommend picks the middle."""
    import numpy as np
    import pandas as pd

    from isosim.frontier import analysis

    rng = np.random.default_rng(0)
    frames = []
    for n, amp in {4: .15, 16: .255, 64: .262, 256: .266, 1024: .2655}.items():
        steps = np.concatenate([[0], np.unique(np.round(np.geomspace(1, 2e6 / (8 * n), 25)))])
        c = steps * 8 * n
        for seed in (0, 1):
            frames.append(pd.DataFrame({"n": n, "b_p": 8, "seed": seed, "step": steps.astype(int), "rollouts": c,
                                        "val_avg": 0.3 + amp * c / (c + 50 * n) + rng.normal(0, 0.001, len(c))}))
    df = pd.concat(frames, ignore_index=True)
    n_tol = {tol: analysis.analyze(df, n_boot=0, tol=tol)["n_tol"][-1] for tol in (0.002, analysis.DEFAULT_TOL, 0.02)}
    assert n_tol == {0.002: 256, analysis.DEFAULT_TOL: 64, 0.02: 16}
    default = analysis.analyze(df, n_boot=0)
    assert smallest_near_optimal_n(default)[:2] == (64, 256)


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


def test_certainty_names_the_choices_the_noise_cannot_separate():
    from isosim.predict.recommend import certainty

    res = _result({8: 0.60, 64: 0.724, 256: 0.7255, 2048: 0.7259})
    res.update(noise=0.002, n_star_band={"lo": [64], "hi": [2048]})
    c = certainty(res, 64, seeds=4)  # se .001: 256 (.0015 away) and 2048 (.0019) are within 2 se, 8 is not
    assert c["n_interval"] == [64.0, 2048.0] and c["expected_regret"] == pytest.approx(0.0019)
    assert c["indistinguishable"] == [256, 2048] and c["noise_se"] == pytest.approx(0.001)


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
    val = subprocess.run([sys.executable, "cli.py", "validate", "--model", "none", "--data", str(data), "--budget",
                          "20000", "--preset", "easy", "--quick", "--train-size", "500", "--dry-run", "--n-boot", "0",
                          "--out", str(tmp_path / "val")], cwd=root, capture_output=True, text=True, env=env)
    assert val.returncode == 0, val.stderr[-2000:]
    first = val.stdout.splitlines()[0]
    assert f"n*(C=20000) = {r['predicted']['n_star'][-1]}," in first and "training-set size 500 (--train-size)" in first
    text = subprocess.run([sys.executable, "cli.py", "recommend", "--budget", "20000", "--quick", "--train-size", "500"],
                          cwd=root, capture_output=True, text=True, env=env).stdout
    assert "training-set size simulated: 500 (given)" in text and "uncalibrated" in text
    assert "profile-only picked n" in text  # the committed scoreboard's track record
