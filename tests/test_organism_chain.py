"""The organism study's whole chain at a quick scale: build, calibrate, predict, train, analyze, compare.

Seconds of work per stage (an organism of 0.04 M parameters, 200 problems, 2 values of n, one
seed, a budget of 128 rollouts); it checks that every stage's output is well-formed and that the
stages agree with each other, not what the numbers are.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("transformers")
pytest.importorskip("accelerate")
pytest.importorskip("math_verify")

pytestmark = pytest.mark.llm
ROOT = Path(__file__).resolve().parents[1]
SCHEMA = ("budgets", "n_star", "n_sat", "n_sat_ci", "n_values", "seeds", "max_rollouts")
RUN = ["--prompt-template", "plain", "--instruction", "", "--answer-fallback", "last-number"]


def sh(env, *args, timeout=600):
    res = subprocess.run([sys.executable, *map(str, args)], capture_output=True, text=True, cwd=ROOT, env=env,
                         timeout=timeout)
    assert res.returncode == 0, f"{args[:3]} failed: {res.stdout[-2000:]}\n{res.stderr[-2000:]}"
    return res


def test_quick_chain_is_consistent_end_to_end(tmp_path):
    env = {"PYTHONPATH": str(ROOT), "PATH": os.environ.get("PATH", "/usr/bin:/bin"), "MPLBACKEND": "Agg",
           "ISOSIM_CACHE": str(tmp_path / "cache"), "HOME": str(tmp_path), "HF_HUB_OFFLINE": "1",
           "TOKENIZERS_PARALLELISM": "false", "OMP_NUM_THREADS": "1"}
    org, cal = tmp_path / "org", tmp_path / "cal"
    sh(env, "-m", "llm_runs.organism", "--out", org, "--scale", "quick", "--sft-steps", 12)
    meta = json.loads((org / "organism.json").read_text())
    assert meta["settings"]["sft_steps"] == 12 and len(meta["weights_sha256"]) == 64

    sh(env, "-c", "import cli; cli.main()", "calibrate", "--model", org / "model", "--data", org / "pool.jsonl",
       "--k", 4, "--temperature", 1.0, "--max-new-tokens", 16, "--batch-size", 256, "--out", cal / "profile.json",
       "--splits", cal / "splits", *RUN)
    profile = json.loads((cal / "profile.json").read_text())
    assert profile["n_problems"] == 200 and len(profile["rates"]) == 200
    # An organism this small has learned next to nothing: its problems fall in the hard band.
    hard = [json.loads(line) for line in (cal / "splits" / "hard.jsonl").read_text().splitlines()]
    assert len(hard) >= 40

    design = ["--n-values", "2,4", "--b-p", 4, "--seeds", "0", "--max-rollouts", 128, "--val-size", 8]
    sh(env, "-m", "llm_runs.organism.predict", "--calibration", cal / "profile.json", "--splits", cal / "splits",
       "--split-names", "hard", "--work", tmp_path / "work", "--out", tmp_path / "prediction.json",
       "--n-boot", 10, *design)
    pred = json.loads((tmp_path / "prediction.json").read_text())["hard"]
    assert all(k in pred for k in SCHEMA)
    assert pred["n_values"] == [2, 4] and pred["seeds"] == [0] and pred["max_rollouts"] == 128
    assert len(pred["n_star"]) == len(pred["budgets"]) and set(pred["n_star"]) <= {2, 4}
    assert pred["train_problems"] == len(hard) - 8

    sets = [x for s in ["val_size=8", "eval_n=4", "eval_k=4", "max_new_tokens=16", "eval_points=2",
                        "temperature=1.0", "prompt_template=plain", "instruction=", "answer_fallback=last-number",
                        "base_lr=3e-4", "recipe=hard", "save_every=2"] for x in ("--set", s)]
    sh(env, "-c", "import cli; cli.main()", "validate", "--model", org / "model", "--data", cal / "splits" /
       "hard.jsonl", "--budget", 128, "--preset", "hard", "--n", "2,4", "--b-p", 4, "--seeds", 1, "--min-steps", 4,
       "--quick", "--n-boot", 0, "--out", tmp_path / "runs", *sets)

    sh(env, "-m", "llm_runs.organism.compare", "--runs", f"hard={tmp_path / 'runs'}", "--prediction",
       tmp_path / "prediction.json", "--measured", tmp_path / "measured.json", "--comparison",
       tmp_path / "comparison.json", "--n-boot", 10)
    meas = json.loads((tmp_path / "measured.json").read_text())["hard"]
    comp = json.loads((tmp_path / "comparison.json").read_text())["hard"]
    assert all(k in meas for k in SCHEMA)
    assert meas["n_values"] == [2, 4] and meas["seeds"] == [0] and meas["max_rollouts"] == 128
    assert meas["recipe"] == "hard" and meas["kl_coef"] == 0 and meas["train_size"] == pred["train_problems"]
    assert meas["budgets"] == pred["budgets"]  # read on the prediction's grid
    assert len(meas["n_star"]) == len(meas["budgets"]) and set(meas["n_star"]) <= {2, 4}
    # the error is what it says: octaves between the two n* lists, budget by budget
    assert comp["budgets"] == meas["budgets"]
    want = [abs(math.log2(p) - math.log2(m)) for p, m in zip(pred["n_star"], meas["n_star"])]
    assert comp["error_octaves"] == pytest.approx(want)
    assert comp["error"]["max"] == pytest.approx(max(want)) and comp["error"]["budgets"] == len(want)


def test_compare_refuses_bad_input_with_one_line(tmp_path, capsys):
    from llm_runs.organism import compare as organism_compare

    (tmp_path / "p.json").write_text(json.dumps({"hard": {}}))
    with pytest.raises(SystemExit) as exc:
        organism_compare.main(["--runs", "medium=x", "--prediction", str(tmp_path / "p.json")])
    assert exc.value.code == 2 and "SPLIT=DIR" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:
        organism_compare.main(["--runs", f"hard={tmp_path / 'nothing'}", "--prediction", str(tmp_path / "p.json")])
    assert exc.value.code == 2 and "no such file" in capsys.readouterr().err


def test_octave_error_and_interval_overlap():
    from llm_runs.organism.compare import compare

    pred = {"budgets": [10.0, 100.0, 1000.0], "n_star": [4, 8, 32], "n_tol": [4, 8, 16],
            "learning": [False, True, True], "n_sat": 32.0, "n_sat_ci": [16.0, 64.0]}
    meas = {"budgets": [100.0, 1000.0], "n_star": [32, 32], "n_tol": [8, 8], "learning": [True, True],
            "n_sat": 128.0, "n_sat_ci": [100.0, 128.0]}
    c = compare(pred, meas)
    assert c["budgets"] == [100.0, 1000.0] and c["error_octaves"] == [2.0, 0.0]
    assert c["error"] == {"median": 1.0, "max": 2.0, "budgets": 2}
    assert c["n_tol_error_octaves"] == [0.0, 1.0]
    assert c["n_sat_ci_overlap"] is False
    meas["n_sat_ci"] = [64.0, 128.0]  # touching intervals overlap
    assert compare(pred, meas)["n_sat_ci_overlap"] is True
