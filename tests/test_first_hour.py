"""Issue 49, the first hour of a practitioner: each answer that was wrong is right or refused.

One test (or more) per defect 1, 3, 4, 5, 7, 8, 9, 10 and per smaller friction; each fails on main
2965a85. Flags are refused with one line and exit 2 before any simulation (``no_sweep``)."""

from __future__ import annotations

import sys
import tomllib
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from cli_helpers import one_line_error, run  # tests/cli_helpers.py

ROOT = Path(__file__).resolve().parents[1]
CONST_RUNS = ROOT / "studies" / "results" / "organism_hard_const" / "hard-128"


@pytest.fixture
def no_sweep(monkeypatch):
    """Fail the test if a simulated sweep starts."""
    from isosim.sweeps import sweep

    def refuse(*a, **kw):
        raise AssertionError("a sweep was started")

    monkeypatch.setattr(sweep, "run_sweep", refuse)


# ----------------------------------------------------------------------------------------------
# 1. plan after `pip install -e .` alone: pyyaml declared; a failed plan leaves nothing behind
# ----------------------------------------------------------------------------------------------
def test_pyyaml_is_a_core_dependency():
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    assert any(d.lower().replace("_", "-").startswith("pyyaml") for d in deps), deps


@pytest.mark.parametrize("given_out", [True, False])
def test_a_plan_that_fails_while_writing_leaves_no_folder(given_out, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setitem(sys.modules, "yaml", None)  # `import yaml` fails, as it did without pyyaml
    out = tmp_path / "sweep"
    args = ["plan", "--for", "trl", "--budget", "2e6"] + (["--out", out] if given_out else [])
    with pytest.raises(ImportError):
        run(monkeypatch, capsys, *args)
    assert not out.exists()
    assert not any((tmp_path / "runs").glob("plan-*")) if (tmp_path / "runs").exists() else True
    assert not [p for p in tmp_path.rglob("*") if p.is_file()]  # not a file anywhere: no partial runs/n2-s0/


# ----------------------------------------------------------------------------------------------
# 3, 4, 5 and --budget inf: every flag checked before any work, one line, once
# ----------------------------------------------------------------------------------------------
def test_recommend_refuses_a_max_batch_of_0_before_simulating(monkeypatch, capsys, no_sweep):
    code, out, err = run(monkeypatch, capsys, "recommend", "--budget", "1e5", "--max-batch", "0")
    one_line_error(code, err, "--max-batch", "(got 0)")
    assert out == ""


def test_recommend_refuses_an_unknown_metric_before_simulating_and_says_it_once(monkeypatch, capsys, no_sweep):
    code, out, err = run(monkeypatch, capsys, "recommend", "--budget", "3e5", "--metric", "nosuch")
    one_line_error(code, err, "--metric 'nosuch'")
    assert err.count("nosuch") == 1 and out == ""


def test_recommend_runs_refuses_an_unknown_trainer_before_printing_a_pick(monkeypatch, capsys):
    code, out, err = run(monkeypatch, capsys, "recommend", "--runs", CONST_RUNS, "--budget", "4e6", "--for", "nosuch")
    one_line_error(code, err, "--for", "'nosuch'")
    assert out == ""  # no pick printed before the refusal


@pytest.mark.parametrize("command", [["recommend"], ["plan", "--for", "trl"]])
def test_an_infinite_budget_is_refused_as_not_finite(command, tmp_path, monkeypatch, capsys, no_sweep):
    code, _, err = run(monkeypatch, capsys, *command, "--budget", "inf", *(["--out", tmp_path / "p"]
                                                                          if command[0] == "plan" else []))
    one_line_error(code, err, "--budget must be finite")
    assert not (tmp_path / "p").exists()


# ----------------------------------------------------------------------------------------------
# 7. a W&B export with its own tags goes through recommend --runs with --map
# ----------------------------------------------------------------------------------------------
def write_export(path: Path, lr: dict[int, float] | None = None) -> Path:
    """A W&B history export: runs of n = 2..16 at B_p 16, two seeds, validation logged as
    ``eval/accuracy`` (a tag isosim does not know), n = 16 best; ``lr``: a learning_rate column."""
    rows = []
    for n in (2, 4, 8, 16):
        for seed in (0, 1):
            for step in range(0, 41):
                c = step * n * 16
                if c > 8192:
                    break
                v = 0.2 + 0.3 * (1 - np.exp(-c / 3000)) * (1 if n >= 8 else 0.8) + 0.002 * seed + 0.02 * (n == 16)
                rows.append({"Step": step, "name": f"run-n{n}-s{seed}", "n": n, "b_p": 16, "seed": seed,
                             "eval/accuracy": v, "train/loss": 1.0,
                             **({"learning_rate": lr[n]} if lr else {})})
    pd.DataFrame(rows).to_csv(path, index=False)
    return path


def test_a_wandb_export_without_known_tags_names_its_columns_and_the_val_avg_map(tmp_path, monkeypatch, capsys):
    csv = write_export(tmp_path / "run.csv")
    code, _, err = run(monkeypatch, capsys, "recommend", "--runs", csv, "--budget", "2e5")
    one_line_error(code, err, "its columns: eval/accuracy, train/loss", "--map val_avg=eval/accuracy")
    assert "--map train_reward" not in err


def test_recommend_runs_reads_a_wandb_export_through_map(tmp_path, monkeypatch, capsys):
    csv = write_export(tmp_path / "run.csv")
    code, out, err = run(monkeypatch, capsys, "recommend", "--runs", csv, "--budget", "1e5",
                         "--map", "val_avg=eval/accuracy")
    assert code == 0, err
    assert "8 runs from W&B export run.csv, n = 2, 4, 8, 16" in out
    assert "pick n = 16;" in out  # the planted best n


# ----------------------------------------------------------------------------------------------
# 8. the pick rule and its wording agree, and are true
# ----------------------------------------------------------------------------------------------
def test_the_pick_is_the_band_cell_with_the_most_steps_and_says_so():
    """At 1e4: n = 4 at B_p 128 (M = 19) was picked as 'the smallest n, leaving the most steps' while
    n = 8 at B_p 32 (M = 39) sat in the band; the pick is now the band's cell with the most steps."""
    from isosim.predict import choice

    cells = {(4, 32): 0.50, (4, 128): 0.700, (8, 32): 0.695, (8, 128): 0.694, (16, 32): 0.60}
    got = choice.pick_cell(cells, se_diff=0.004)
    assert sorted(got["band"]) == [(4, 128), (8, 32), (8, 128)]
    assert got["pick"] == (8, 32) and got["best"] == (4, 128)
    steps = {c: int(1e4 // (c[0] * c[1])) for c in got["band"]}
    assert steps[got["pick"]] == max(steps.values()) == 39
    why = choice.pick_reason(got["pick"], got["best"], got["band"], 1e4)
    assert "most update steps, n = 8 at B_p 32 (M = 39, against 19 for the best cell)" in why


# ----------------------------------------------------------------------------------------------
# 9. validate's report: n_sat named once and right; the nearest n tried is not "a predicted n"
# ----------------------------------------------------------------------------------------------
def test_the_verdict_calls_the_nearest_n_tried_by_its_name():
    from isosim.validation.verdict import Observed, Prediction, decide

    v = decide(Prediction(n_star=8, n_tol=8, n_tie_hi=8),
               {4: Observed(0.50, 0.01), 16: Observed(0.51, 0.01), 64: Observed(0.30, 0.01)}, base_reward=0.1)
    assert v.predicted_set == [4] and v.agreement == "consistent, unresolved"
    assert "a predicted n" not in v.reason
    assert "n tried nearest the predicted n* = 8 (n = 4; no n in the predicted band was run)" in v.reason


def _validation_inputs(saturated: bool):
    plan = SimpleNamespace(predicted={"n_star": 4, "n_tol": 4, "n_tie_hi": 4, "n_sat": 8.0, "source": "easy preset",
                                      "saturated_by_budget": saturated},
                           runs=[SimpleNamespace(config={"budget": 20000})], b_p=16)
    rows = [{"run_id": f"n{n}", "n": n, "step": s, "rollouts": s * 16 * n, "val_avg": 0.3 + 0.01 * s, "val_size": 300,
             "eval_n": 4, "val_best": 0.5, "val_worst": 0.1, "train_reward": 0.4} for n in (2, 8) for s in (0, 5)]
    return plan, pd.DataFrame(rows)


def test_the_verdict_sentence_says_n_sat_as_the_plan_lines_do():
    from isosim.validation.validation import verdict

    plan, df = _validation_inputs(saturated=False)
    sentence = verdict(plan, df)["sentence"]
    assert "(n_sat = 8)" not in sentence
    assert "n_sat: not saturated by C (fitted upper level 8)" in sentence
    plan, df = _validation_inputs(saturated=True)
    assert "(n_sat = 8)" in verdict(plan, df)["sentence"]
    from isosim.validation.validation import n_sat_text  # the plan lines' wording is the same function

    assert n_sat_text(plan.predicted, ".1f") == "n_sat = 8.0"


def test_the_report_counts_the_n_values_that_ran():
    from isosim.validation.validation import real_n_sat_line

    assert "with two n values this is a bound" in real_n_sat_line({"n_sat": 6.0}, 2)
    assert "three" not in real_n_sat_line({"n_sat": 6.0}, 2)


# ----------------------------------------------------------------------------------------------
# 10. the progress line's share of rollouts is the rollouts' own
# ----------------------------------------------------------------------------------------------
def test_the_progress_line_gives_the_rollouts_their_own_share(monkeypatch):
    from isosim.sweeps import store

    monkeypatch.setattr(store, "LOG_EVERY_S", 0.0)
    lines: list[str] = []
    bar = store._Bar(True, total=100.0, done=0.0, rollouts=0.0, total_rollouts=2.7e8, description="sweep x",
                     log=lines.append)
    bar.set(26.0, 2.06e8)
    line = lines[-1]
    assert "2.06e+08 of 2.7e+08 rollouts (76%)" in line and "26% of the simulation time done" in line, line


# ----------------------------------------------------------------------------------------------
# Smaller frictions
# ----------------------------------------------------------------------------------------------
def test_the_plan_readme_names_the_installs_by_real_extras(tmp_path, monkeypatch, capsys):
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    for trainer, extra in (("trl", "trl"), ("verl", "tensorboard")):
        out = tmp_path / trainer
        code, _, err = run(monkeypatch, capsys, "plan", "--for", trainer, "--budget", "2e6", "--out", out)
        assert code == 0, err
        text = (out / "README.md").read_text()
        assert f"pip install -e '.[{extra}]'" in text and extra in extras
    assert any(d.startswith("trl") for d in extras["trl"]) and any(d.startswith("tensorboard") for d in extras["trl"])


def test_the_plans_reward_function_is_trls_and_the_readmes(tmp_path, monkeypatch, capsys):
    import re

    from isosim.integrations.plan_files import USER_ARGS

    code, out, err = run(monkeypatch, capsys, "plan", "--for", "trl", "--budget", "2e6", "--out", tmp_path / "p")
    assert code == 0, err
    printed = re.search(r"--reward_funcs (\S+)", out).group(1)
    assert printed == "accuracy_reward" and f"--reward_funcs {printed}" in USER_ARGS["trl"]
    trl_rewards = pytest.importorskip("trl.rewards")
    assert hasattr(trl_rewards, printed)  # train_grpo.py resolves it as TRL's own reward
    for name in re.findall(r"--reward_funcs (\S+)", (ROOT / "README.md").read_text()):
        assert name == printed, name


def test_validate_refuses_a_model_that_is_nowhere_before_any_work(tmp_path, monkeypatch, capsys, no_sweep):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf"))
    data = tmp_path / "d.jsonl"
    data.write_text('{"id": "a", "problem": "1+1", "answer": "2"}\n')
    code, out, err = run(monkeypatch, capsys, "validate", "--model", "nosuchmodel", "--data", data, "--budget", "20000",
                         "--quick", "--train-size", "500", "--dry-run", "--out", tmp_path / "v")
    one_line_error(code, err, "--model nosuchmodel", "Hugging Face cache", "owner/name")
    assert not (tmp_path / "v").exists()


def test_validate_accepts_a_model_in_the_hf_cache(tmp_path, monkeypatch):
    from llm_runs.sampling.models import check_model

    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    snap = tmp_path / "models--gpt2" / "snapshots" / "abc"
    snap.mkdir(parents=True)
    (snap / "config.json").write_text("{}")
    check_model("gpt2")  # a bare id, but cached


def test_profile_only_recommend_names_fixed_n8_and_the_cheap_sweep(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("ISOSIM_CACHE", str(tmp_path / "cache"))
    code, out, err = run(monkeypatch, capsys, "recommend", "--budget", "20000", "--quick", "--train-size", "500")
    assert code == 0, err
    text = " ".join(out.split())
    assert "a fixed n = 8 did as well as such profile-only predictions" in text
    assert ("isosim plan --for trl|verl --budget 2e+04 --out SWEEP, run it, then isosim recommend --runs SWEEP/runs "
            "--budget 2e+04") in text
