"""The organism's set-size sweeps: settings, run configs and bad input (llm_runs.organism.f8)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from isosim.errors import IsosimError
from llm_runs.config import RunConfig
from llm_runs.organism import f8

ROOT = Path(__file__).resolve().parents[1]


def test_settings_name_split_size_and_temperature():
    s = f8.parse_setting("hard-128-t06")
    assert (s["split"], s["recipe"], s["max_train_problems"], s["temperature"]) == ("hard", "hard", 128, 0.6)
    assert Path(s["data"]).name == "hard.jsonl" and Path(s["data"]).is_file()
    assert f8.parse_setting("easy-all")["max_train_problems"] is None
    assert f8.parse_setting("easy-512")["temperature"] == 1.0
    assert f8.parse_setting("easy-512-t1")["temperature"] == 1.0


@pytest.mark.parametrize("bad", ["medium-128", "easy", "easy-0", "easy-12x", "hard-128-x06"])
def test_bad_settings_are_refused(bad):
    with pytest.raises(IsosimError):
        f8.parse_setting(bad)


def test_run_config_is_a_valid_run_with_the_settings_of_the_sweep(tmp_path):
    cfg = f8.run_config("hard-512-t06", 32, 1, 200000, "runs/organism/model", tmp_path / "n32_bp16_s1",
                        {"pause_at_rollouts": 10000})
    rc = RunConfig.from_dict(cfg, source="test")
    assert (rc.n, rc.seed, rc.b_p, rc.budget, rc.max_train_problems) == (32, 1, 16, 200000, 512)
    assert rc.temperature == rc.eval_temperature == 0.6 and rc.recipe == "hard"
    assert rc.pause_at_rollouts == 10000 and rc.val_size == 300 and rc.run_id == "n32_bp16_s1"


def test_cli_bad_setting_is_one_line_and_exit_2(tmp_path):
    res = subprocess.run([sys.executable, "-m", "llm_runs.organism.f8", "run", "--setting", "medium-128",
                          "--model", "x", "--out", str(tmp_path)], capture_output=True, text=True, cwd=ROOT,
                         env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert res.returncode == 2, res.stderr
    assert res.stderr.strip().count("\n") == 0 and "medium-128" in res.stderr


def test_committed_predictions_carry_the_schema():
    folder = ROOT / "studies" / "results" / "organism_f8"
    keys = {"budgets", "n_star", "n_tol", "n_tie_hi", "learning", "n_sat", "n_sat_ci", "saturated", "n_values",
            "seeds", "max_rollouts", "final_val_avg", "seed_sd"}
    # every sweep folder of runs is measured, and every measured sweep has all three predictions
    sweeps = {d.name for d in folder.iterdir() if d.is_dir() and any(d.glob("n*_bp16_s*/records.jsonl"))}
    assert {"hard-128", "hard-256", "hard-512", "hard-1238-t06"} <= sweeps
    assert set(json.loads((folder / "measured.json").read_text())) == sweeps
    for name in ("prediction.json", "prediction_calibrated.json", "prediction_dynamics.json"):
        doc = json.loads((folder / name).read_text())
        assert set(doc) == sweeps, name
        for entry in doc.values():
            assert keys <= set(entry), (name, keys - set(entry))
            assert len(entry["n_star"]) == len(entry["budgets"]) == len(entry["n_tie_hi"])
            assert entry["n_values"] == [2, 4, 8, 16, 32, 64, 128]
