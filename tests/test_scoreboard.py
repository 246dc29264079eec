"""The scoreboard's scores, the cheap-part prediction (isosim predict) and scores that can fail."""

import json
import math
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[1]
EASY = ROOT / "studies" / "results" / "organism" / "real" / "easy"


def _runs(curves, seeds=(0, 1), b_p=16, budget=2e5, noise=0.0, rng=None):
    """Records of runs whose val_avg follows ``curves[n](rollouts, seed)`` at 12 log-spaced steps."""
    rows = []
    for n, f in curves.items():
        last = int(budget // (n * b_p))
        for s in seeds:
            for step in [0, *np.unique(np.round(np.geomspace(1, last, 12)).astype(int))]:
                c = float(step * n * b_p)
                v = f(c, s) + (noise * rng.standard_normal() if rng is not None and step else 0.0)
                rows.append({"run_id": f"n{n}_bp{b_p}_s{s}", "n": n, "b_p": b_p, "seed": s, "step": int(step),
                             "rollouts": c, "val_avg": v, "budget": budget, "train_size": 1000, "val_size": 100,
                             "recipe": "easy"})
    return pd.DataFrame(rows)


def _write(df, folder):
    for rid, g in df.groupby("run_id"):
        d = folder / rid
        d.mkdir(parents=True)
        (d / "records.jsonl").write_text("".join(json.dumps(r) + "\n" for r in g.to_dict("records")))
        r = g.iloc[0]
        (d / "config.json").write_text(json.dumps({"n": int(r["n"]), "b_p": int(r["b_p"]), "seed": int(r["seed"])}))
    return folder


def test_regret_and_noise_are_the_seed_means_at_the_budget():
    from isosim.validation import scoreboard as sb

    # n = 4 is better than n = 8 by .05; seeds differ by +-.01 (sd of a pair .01414, se .01)
    curves = {4: lambda c, s: 0.5 + (0.05 if c > 0 else 0) + (0.01 if s else -0.01),
              8: lambda c, s: 0.5 + (0.01 if s else -0.01)}
    df = _runs(curves)
    tab = sb.budget_table(df, np.array([2e5]))
    assert tab["best"] == [4]
    assert tab["noise"][0] == pytest.approx(math.sqrt(2) * 0.01 / math.sqrt(2))
    r = sb.score_picks([8], tab, n_star=[4], scored=np.array([True]))
    assert r["regret"] == pytest.approx(0.05) and r["octaves_top"] == 1.0 and r["n_pick"] == 8
    assert sb.score_picks([4], tab, n_star=[4], scored=np.array([True]))["regret"] == 0.0


def test_an_n_that_cannot_take_a_step_scores_its_step0_value():
    from isosim.validation import scoreboard as sb

    curves = {4: lambda c, s: 0.4 + 0.1 * (c > 0), 128: lambda c, s: 0.4 + 0.2 * (c > 0)}
    df = _runs(curves)
    tab = sb.budget_table(df, np.array([100.0, 2e5]))
    assert not tab["free"][0] and tab["free"][1]  # at 100 rollouts only n = 4 (64 a step) has stepped
    assert tab["mean"][1, 0] == pytest.approx(0.4) and tab["best"] == [4, 128]


def test_budgets_match_within_the_relative_tolerance_not_rounded_logs():
    from llm_runs.organism.compare import compare

    pred = {"budgets": [1000.0 * (1 + 5e-7)], "n_star": [8], "n_tol": [8], "learning": [True],
            "n_sat": 8.0, "n_sat_ci": [4.0, 128.0], "n_values": [4, 8, 128]}
    meas = {"budgets": [1000.0], "n_star": [4], "n_tol": [4], "learning": [True], "n_sat": 4.0,
            "n_sat_ci": [4.0, 4.0], "n_values": [4, 8, 128], "b_p": [16]}
    c = compare(pred, meas)
    assert c["budgets"] == [1000.0] and c["error_octaves"] == [1.0]
    # an interval over the whole grid says nothing: no overlap claimed
    assert c["n_sat_ci_overlap"] is None and c["n_sat_ci_informative"] == {"predicted": False, "measured": True}
    pred["budgets"] = [1000.0 * (1 + 5e-6)]
    with pytest.raises(Exception, match="share no budget"):
        compare(pred, meas)


def test_scored_budgets_leave_out_those_where_only_the_smallest_n_has_stepped():
    from llm_runs.organism.compare import compare

    pred = {"budgets": [64.0, 128.0, 1000.0], "n_star": [4, 8, 8], "n_tol": [4, 8, 8], "learning": [True] * 3,
            "n_sat": 8.0, "n_sat_ci": [8.0, 8.0]}
    meas = {**pred, "n_star": [4, 4, 4], "n_tol": [4, 4, 4], "n_values": [4, 8, 16], "b_p": [16]}
    c = compare(pred, meas)
    assert c["scored"] == [False, True, True]
    assert c["error_learning_budgets"] == {"median": 1.0, "max": 1.0, "budgets": 2}


def test_a_frontier_on_the_grids_floor_is_flagged_like_a_top_hit():
    from isosim.frontier import analysis

    curves = {n: (lambda n: lambda c, s: 0.3 + 0.4 * (1 - 1 / (1 + c / (1000.0 * n))))(n) for n in (4, 8, 16, 32)}
    res = analysis.analyze(_runs(curves, noise=0.002, rng=np.random.default_rng(0)), n_boot=0)
    assert set(res["n_star"]) == {4}
    assert res["fit"]["at_floor"] is True and res["fit"]["saturated"] is False
    assert any("smallest n tried" in w for w in res["warnings"])
    summary = analysis.frontier_summary(res)
    assert summary["n_tie_hi"] and summary["at_floor"] is True


def test_shift_extrapolation_picks_the_n_furthest_along_and_has_the_schema(tmp_path):
    from isosim.predict.extrapolate import predict_from_cheap

    # the same curve shifted: n = 8 is furthest along per rollout
    shift = {4: 2.0, 8: 1.0, 16: 3.0}
    curves = {n: (lambda k: lambda c, s: 0.3 + 0.4 / (1 + (3000.0 * k / max(c, 1e-9)) ** 1.2))(k)
              for n, k in shift.items()}
    folder = _write(_runs(curves), tmp_path / "sweep")
    e = predict_from_cheap(folder, max_rollouts=1e4, budget=2e5, method="shift", n_boot=0)
    for key in ("budgets", "n_star", "n_tol", "n_tie_hi", "learning", "n_sat", "n_sat_ci", "saturated", "n_values",
                "seeds", "max_rollouts", "final_val_avg", "seed_sd"):
        assert key in e, key
    assert e["n_star"][-1] == 8 and e["n_values"] == [4, 8, 16] and e["max_rollouts"] == 2e5
    assert e["cheap"]["max_rollouts"] == 1e4 and e["final_val_avg"]["8"] > e["final_val_avg"]["16"]


def test_the_cheap_part_reads_nothing_past_its_limit(tmp_path):
    from isosim.validation import scoreboard as sb
    from isosim.predict.extrapolate import predict_from_cheap

    corrupt = tmp_path / "easy"
    shutil.copytree(EASY, corrupt)
    for f in corrupt.glob("*/records.jsonl"):
        rows = [json.loads(ln) for ln in f.read_text().splitlines()]
        rows = [r if r["rollouts"] <= 1e4 else {**r, "val_avg": 99.0, "train_size": -5} for r in rows]
        f.write_text("".join(json.dumps(r) + "\n" for r in rows))
    a = predict_from_cheap(EASY, max_rollouts=1e4, budget=2e5, n_boot=0)
    b = predict_from_cheap(corrupt, max_rollouts=1e4, budget=2e5, n_boot=0)
    assert a["n_star"] == b["n_star"] and a["final_val_avg"] == b["final_val_avg"]
    assert sb.cheap_best(EASY, 2e5)["seed_mean"] == sb.cheap_best(corrupt, 2e5)["seed_mean"]


def test_predict_cli_bad_input_is_one_line(tmp_path):
    res = subprocess.run([sys.executable, "cli.py", "predict", "--runs", str(tmp_path / "none"), "--max-rollouts",
                          "1e4", "--budget", "2e5"], cwd=ROOT, capture_output=True, text=True)
    assert res.returncode == 2 and "no such file or folder" in res.stderr and "Traceback" not in res.stderr
    res = subprocess.run([sys.executable, "cli.py", "predict", "--runs", str(EASY), "--max-rollouts", "1e4",
                          "--budget", "2e5", "--method", "magic"], cwd=ROOT, capture_output=True, text=True)
    assert res.returncode == 2 and "--method" in res.stderr


def test_the_committed_scoreboard_has_every_predictor_and_sweep():
    doc = json.loads((ROOT / "studies" / "results" / "scoreboard.json").read_text())
    assert {"easy-3200", "hard-1238"} <= set(doc["sweeps"])
    for s in doc["sweeps"].values():
        assert set(s["predictors"]) == {"isosim_profile", "isosim_calibrated", "paper", "smallest_n", "largest_n",
                                        "cheap_best"}
        for r in s["predictors"].values():
            assert {"n_pick", "regret", "noise"} <= set(r) and len(r["per_budget"]["octaves"]) == len(s["budgets"])
    assert doc["kept_method"] in doc["methods"]


def test_later_sweeps_are_found_by_folder_and_unfinished_ones_wait(tmp_path):
    from isosim.validation import scoreboard as sb

    f8 = tmp_path / "organism_f8"
    curves = {2: lambda c, s: 0.5 + 1e-6 * c ** 0.5, 8: lambda c, s: 0.5 + 2e-6 * c ** 0.5}
    _write(_runs(curves), f8 / "easy-128" / "runs")
    part = _runs(curves)
    _write(part[part["rollouts"] <= 1e4], f8 / "easy-512")
    (f8 / "prediction_calibrated.json").write_text(json.dumps({"easy-128": {"budgets": [2e5], "n_star": [8]}}))
    specs = sb.discover(tmp_path)
    assert set(specs) == {"easy-128", "easy-512"} and specs["easy-128"]["prospective"]
    assert specs["easy-128"]["calibrated"] == {"budgets": [2e5], "n_star": [8]}
    assert sb.unfinished(specs["easy-128"]["runs"]) == [] and len(sb.unfinished(specs["easy-512"]["runs"])) == 4
    s = sb.score_sweep("easy-128", specs["easy-128"])
    assert s["predictors"]["isosim_calibrated"]["n_pick"] == 8 and s["predictors"]["paper"]["n_pick"] == 8
    assert s["predictors"]["smallest_n"]["regret"] > 0 == s["predictors"]["largest_n"]["regret"]


def test_attainable_finds_sweeps_where_no_pick_meets_both_bars():
    from isosim.validation import scoreboard as sb

    # the best seed mean is n = 128 (by .05, noise .01) but the frontier's n* is 32: no n is both
    # within 2x noise of the best and within 1 octave of n*
    curves = {n: (lambda c, s, n=n: 0.5 + (0.05 if n == 128 and c > 0 else 0) + (0.01 if s else -0.01))
              for n in (8, 16, 32, 64, 128)}
    tab = sb.budget_table(_runs(curves), np.array([2e5]))
    a = sb.attainable(tab, n_star=[32])
    assert a["within_2_noise"] == [128] and a["within_1_octave"] == [16, 32, 64] and a["both"] == []
    # with n* 64 the same sweep is passable by 128 alone
    assert sb.attainable(tab, n_star=[64])["both"] == [128]
