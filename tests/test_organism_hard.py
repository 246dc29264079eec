"""The second organism's sweep tools: ``f8 --splits`` (another organism's splits), the simulated
sweep read in both readings, and the cheap readers' picks at a share of each budget."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from llm_runs.organism import cheap_picks, f8
from llm_runs.organism.predict import simulated_readings

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "studies" / "results"


def test_a_setting_takes_its_split_from_the_splits_folder(tmp_path):
    assert f8.parse_setting("hard-128-t06")["data"] == str(f8.SPLITS / "hard.jsonl")
    s = f8.parse_setting("hard-128-t06", tmp_path)
    assert s["data"] == str(tmp_path / "hard.jsonl") and s["temperature"] == 0.6 and s["max_train_problems"] == 128
    cfg = f8.run_config("hard-128-t06", 8, 1, 10**6, "organism-hard", tmp_path / "run", {}, tmp_path)
    assert cfg["data"] == str(tmp_path / "hard.jsonl") and cfg["model"] == "organism-hard" and cfg["n"] == 8


def test_run_refuses_a_missing_splits_folder(tmp_path, capsys):
    with pytest.raises(SystemExit) as exc:
        f8.main(["run", "--setting", "hard-128-t06", "--splits", str(tmp_path / "none"), "--out", str(tmp_path / "o")])
    assert exc.value.code == 2 and "no such folder" in capsys.readouterr().err


def test_simulated_readings_differ_where_a_curve_falls():
    # n 2 peaks at .6 then falls to .3; n 8 climbs to .5: best reading picks 2, final picks 8
    rows = []
    for seed, d in ((0, 0.0), (1, 0.01)):
        for r, v2, v8 in ((1e3, 0.6 + d, 0.2 + d), (1e4, 0.3 + d, 0.5 + d)):
            rows += [{"n": 2, "seed": seed, "rollouts": r, "val_avg": v2}, {"n": 8, "seed": seed, "rollouts": r, "val_avg": v8}]
    out = simulated_readings(pd.DataFrame(rows), [1e4])
    assert out["best"][0]["n_star"] == 2 and out["final"][0]["n_star"] == 8
    assert out["best"][0]["tie_band"] == [2] and out["final"][0]["tie_band"] == [8]


def test_cut_lines_stops_at_the_first_record_past_the_limit():
    lines = [json.dumps({"rollouts": r}) for r in (0, 100, 200, 150)]
    assert cheap_picks.cut_lines("\n".join(lines) + "\n\n", 150) == lines[:2]


def test_cheap_picks_repeat_the_committed_long_sweep_picks():
    """hard-1238-long cut at 5 % of 2e6: the picks committed in plane_predictions_long.json
    (isosim recommend on the records at or below 1e5) come out again, in the best reading."""
    committed = json.loads((RESULTS / "plane_predictions_long.json").read_text())["sweeps"]["hard-1238-t06"]
    got = cheap_picks.picks(RESULTS / "organism_long" / "hard-1238-long", [2e6], 0.05)
    assert got["cheap_budgets"] == [1e5]
    for label, want in committed.items():
        best = got["detail"][label]["best"][0]
        assert best["pick"] == want["pick"] == got["picks"][label]["best"][0]
        assert best["tie_band"] == want["tie_band"] and best["cheap_rollouts"] == want["cheap_rollouts"]


def test_predict_writes_the_fixed_n_and_the_setting_of_another_organism(tmp_path, monkeypatch):
    import llm_runs.organism.predict as pr

    seen = {}

    def fake(split, calibration, splits, work, n_boot, **kw):
        seen.update(split=split, splits=splits, **kw)
        return {"budgets": [1e3, 1e6], "n_star": [2, 8], "n_sat": 4.0, "n_sat_ci": [2, 8],
                "readings": {"best": [], "final": []}}

    monkeypatch.setattr(pr, "predict", fake)
    out = tmp_path / "prediction.json"
    f8.main(["predict", "--sweep", "s=hard-128-t06", "--splits", str(tmp_path), "--calibration", "c.json",
             "--readings", "1e5,1e6", "--model", "organism-hard", "--fixed-n", "8", "--fixed-n-why", "a constant",
             "--work", str(tmp_path / "w"), "--out", str(out)])
    entry = json.loads(out.read_text())["s"]
    assert seen["splits"] == tmp_path.resolve() and seen["readings"] == [1e5, 1e6] and seen["train_problems"] == 128
    assert entry["fixed_n"] == {"n": 8, "budgets": [1e5, 1e6], "why": "a constant"}
    assert entry["setting"]["model"] == "organism-hard" and entry["setting"]["data"] == str(tmp_path.resolve() / "hard.jsonl")


def test_predict_simulates_the_runs_lr_rule_and_records_it(tmp_path, monkeypatch):
    import llm_runs.organism.predict as pr
    from isosim.sweeps import sweep as sweep_mod

    seen = {}

    def fake(split, calibration, splits, work, n_boot, **kw):
        seen.update(work=work, **kw)
        return {"budgets": [1e3, 1e6], "n_star": [2, 8], "n_sat": 4.0, "n_sat_ci": [2, 8]}

    monkeypatch.setattr(pr, "predict", fake)
    out = tmp_path / "prediction.json"
    f8.main(["predict", "--sweep", "s=hard-128-t06", "--splits", str(tmp_path), "--calibration", "c.json",
             "--lr-rule", "constant", "--work", str(tmp_path / "w"), "--out", str(out)])
    assert seen["lr_rule"] == "constant" and seen["work"].name.endswith("-lr-constant")  # never the sqrt sweep's cache
    assert json.loads(out.read_text())["s"]["setting"]["lr_rule"] == "constant"
    # the rule reaches the simulated runs: every n at the preset's reference-batch lr
    plan = sweep_mod.plan_for_preset("hard", "q1", seeds=1, budget_max=1e4, n_values=[4, 64], b_p=16, lr_rule="constant")
    assert plan.base["lr_rule"] == "constant" and plan.base.get("lr_power") is None
