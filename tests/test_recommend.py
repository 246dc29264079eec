"""recommend's choice of n near saturation, and its B_p rule."""

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


def test_near_tie_is_the_analysis_tie_tolerance():
    from isosim.frontier.analysis import DEFAULT_TOL

    assert NEAR_TIE == DEFAULT_TOL  # recommend's smallest near-optimal n is the frontier's n_tol


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
