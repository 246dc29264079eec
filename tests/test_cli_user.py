"""What a new user meets on the command line: any budget answered quickly and said plainly,
conflicting flags refused with one line, rows left out of an analysis named, predictions and
validation plans worded as they are."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[1]


from cli_helpers import one_line_error, run  # noqa: E402  (tests/cli_helpers.py)


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("ISOSIM_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


# --------------------------------------------------------------------------------------------
# recommend: any budget, conflicting flags
# --------------------------------------------------------------------------------------------
def test_a_budget_past_the_cap_simulates_to_the_cap_and_says_so(cache, monkeypatch, capsys):
    from isosim.predict import recommend as rec
    from isosim.sweeps import sweep

    real = sweep.run_sweep
    simulated = []

    def run_sweep(plan, *a, **kw):
        simulated.append(max(c.budget for c in plan.cells))
        assert simulated[-1] <= 2e4, f"a sweep to {simulated[-1]:g} rollouts was started"
        return real(plan, *a, **kw)

    monkeypatch.setattr(sweep, "run_sweep", run_sweep)
    monkeypatch.setattr(rec, "SIM_BUDGET_CAP", 2e4, raising=False)  # the quick grid, a cap that takes a second
    for budget in ("1e12", "1e13"):  # 1e13 is the largest budget recommend answers (MAX_BUDGET)
        code, out, err = run(monkeypatch, capsys, "recommend", "--budget", budget, "--quick", "--json")
        assert code == 0, err
        r = json.loads(out)
        assert r["budget"] == float(budget) and r["simulated_budget"] == 2e4
        assert r["m"] == int(float(budget) // (r["b_p"] * r["n"]))  # B_p and M are for the budget asked
        assert "not at the budget asked" in r["reasons"]["n"] and "stops at 2e4" in r["reasons"]["n"]
    assert simulated == [2e4, 2e4]
    code, out, _ = run(monkeypatch, capsys, "recommend", "--budget", "1e12", "--quick")
    assert code == 0 and "simulated to 2e4 rollouts, not to C = 1e+12" in out


def test_explore_refuses_a_budget_no_simulation_can_reach(tmp_path, monkeypatch, capsys):
    code, _, err = run(monkeypatch, capsys, "explore", "--quick", "--budget-max", "1e30", "--out", tmp_path / "e")
    one_line_error(code, err, "update steps", "lower --budget-max to at most")
    assert not (tmp_path / "e").exists()


@pytest.mark.parametrize("flags", [["--budget", "1e6", "--gpu-hours", "10", "--rollouts-per-gpu-hour", "100"],
                                   ["--budget", "1e6", "--gpu-hours", "10"],
                                   ["--budget", "1e6", "--rollouts-per-gpu-hour", "100"]])
def test_budget_and_gpu_hours_together_are_refused(flags, cache, monkeypatch, capsys):
    code, _, err = run(monkeypatch, capsys, "recommend", *flags, "--quick")
    one_line_error(code, err, "not both")


def test_a_mix_whose_weights_do_not_sum_to_one_is_refused(cache, monkeypatch, capsys):
    code, _, err = run(monkeypatch, capsys, "recommend", "--budget", "2e4", "--quick", "--preset", "hard:0.5,easy:0.7")
    one_line_error(code, err, "sum to 1", "1.2")
    from isosim.sim.profiles import get_profile

    assert get_profile("hard:0.1,easy:0.9").kind == "mix"  # shares that sum to 1 pass


def test_preset_with_profile_does_what_help_says(cache, tmp_path, monkeypatch, capsys):
    """--preset picks the simulated dynamics and recipe; --profile replaces its problems."""
    from typer.testing import CliRunner

    import cli

    text = " ".join(CliRunner().invoke(cli.app, ["recommend", "--help"], terminal_width=200).output.split())
    assert "ignored with --profile" not in text
    assert "with --profile the profile's problems replace the preset's" in text
    profile = tmp_path / "p.json"
    profile.write_text(json.dumps({"k": 16, "rates": [0.0] * 40 + [0.02] * 40 + [0.5] * 20}))
    code, out, err = run(monkeypatch, capsys, "recommend", "--budget", "2e4", "--quick", "--json",
                         "--preset", "hard", "--profile", profile)
    assert code == 0, err
    r = json.loads(out)
    assert r["recipe"] == "hard" and r["simulated_config"]["profile"] == str(profile.resolve())


def test_a_budget_too_small_to_learn_states_its_c_and_no_regret(cache, monkeypatch, capsys):
    # one step of the smallest cell (n = 2 at B_p 32: 64 rollouts) fits in 100; nothing is learned in it
    code, out, err = run(monkeypatch, capsys, "recommend", "--budget", "100", "--train-size", "1200", "--json")
    assert code == 0, err
    r = json.loads(out)
    assert r["m"] == 1 and (r["n"], r["b_p"]) == (2, 32) and r["expected_regret"] is None and r["regret_reason"]
    assert "C = 64 rollouts" in r["reasons"]["n"] and "the budget asked is 100" in r["reasons"]["n"]
    assert "no learning simulated" in r["reasons"]["n"]
    assert r["n_sat"] is None and "only 1 distinct n" in r["n_sat_reason"]
    code, out, _ = run(monkeypatch, capsys, "recommend", "--budget", "100", "--train-size", "1200")
    assert code == 0 and "expected regret of" not in out and "expected regret: none to state" in out


def test_json_gives_n_sat_only_when_saturated(cache, monkeypatch, capsys):
    code, out, err = run(monkeypatch, capsys, "recommend", "--budget", "1e5", "--json")
    assert code == 0, err
    r = json.loads(out)
    assert r["saturated_by_budget"] is False  # the easy preset's n* is still rising at 1e5
    assert r["n_sat"] is None and r["n_sat_ci"] is None and "not saturated by C" in r["n_sat_reason"]
    assert r["fitted_upper_n"] is not None  # the sigmoid's upper level, under its own name


# --------------------------------------------------------------------------------------------
# analyze: rows left out are named, a run evaluated twice at one budget is not averaged
# --------------------------------------------------------------------------------------------
def _records() -> pd.DataFrame:
    rng = np.random.default_rng(0)
    rows = []
    for n in (4, 16, 64):
        for seed in (0, 1):
            steps = np.unique(np.round(np.geomspace(1, 1e5 / (8 * n), 12))).astype(int)
            steps = np.concatenate([[0], steps])
            c = steps * 8 * n
            val = 0.3 + (0.2 + 0.03 * np.log2(n)) * c / (c + 300 * n) + rng.normal(0, 0.003, len(c))
            rows.append(pd.DataFrame({"n": n, "b_p": 8, "seed": seed, "step": steps, "rollouts": c, "val_avg": val}))
    return pd.concat(rows, ignore_index=True)


def test_analyze_names_the_rows_it_leaves_out(tmp_path, monkeypatch, capsys):
    df = _records().astype({"val_avg": object})
    df.loc[3, "val_avg"] = "abc"
    df.loc[5, "val_avg"] = np.nan
    last = df[(df["n"] == 16) & (df["seed"] == 0)].iloc[-1]
    twice = last.copy()
    df = pd.concat([df.iloc[: last.name + 1], twice.to_frame().T.assign(val_avg=0.9), df.iloc[last.name + 1:]])
    df.to_csv(tmp_path / "runs.csv", index=False)
    code, out, err = run(monkeypatch, capsys, "analyze", tmp_path / "runs.csv", "--n-boot", "0", "--out", tmp_path / "a")
    assert code == 0, err
    text = " ".join(out.split())
    assert f"left out 2 of {len(df)} rows whose val_avg cannot be fitted: 1 not a number ('abc'); 1 empty" in text
    assert "1 run(s) have several evaluations at one budget" in text and "kept the last" in text


def test_a_run_evaluated_twice_at_one_budget_keeps_the_last_evaluation():
    from isosim.frontier.report import clean_records
    from isosim.records import normalize

    df = normalize(pd.DataFrame({"n": 4, "b_p": 8, "seed": 0, "rollouts": [0, 320, 320, 640],
                                 "val_avg": [0.3, 0.5, 0.6, 0.62]}))
    kept, notes = clean_records(df, "val_avg")
    assert kept["val_avg"].tolist() == [0.3, 0.6, 0.62] and len(notes) == 1


# --------------------------------------------------------------------------------------------
# predict: readable numbers; an interval over the whole grid says it carries no information
# --------------------------------------------------------------------------------------------
def test_prediction_lines_are_formatted_and_flag_an_uninformative_interval():
    from isosim.frontier.wording import prediction_lines

    entry = json.loads((ROOT / "studies/results/organism_f8/prediction_calibrated.json").read_text())["hard-128"]
    entry = {**entry, "n_values": [2, 4, 8, 16, 32, 64, 128]}
    text = "\n".join(prediction_lines(entry))
    assert not re.search(r"\d\.\d{4,}", text), text  # no raw floats
    assert "n_sat: 66.9 (interval 2.0-128.0: it spans the whole grid n = 2-128, so it carries no information" in text
    narrow = "\n".join(prediction_lines({**entry, "n_sat_ci": [30.0, 67.0]}))
    assert "(interval 30.0-67.0)" in narrow and "no information" not in narrow.split("\n")[1]


def test_docs_name_run_folders_that_exist():
    for doc in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for folder in re.findall(r"--runs (studies/\S+)", doc.read_text(encoding="utf-8")):
            assert (ROOT / folder).is_dir(), f"{doc.name}: --runs {folder} does not exist"


# --------------------------------------------------------------------------------------------
# validate: plans worded as they are; the [llm] extra asked for before anything starts
# --------------------------------------------------------------------------------------------
def test_a_plan_centred_on_n_star_does_not_call_it_n_sat(cache, tmp_path, monkeypatch, capsys):
    pytest.importorskip("transformers")
    code, out, err = run(monkeypatch, capsys, "validate", "--model", "smollm2-135m", "--data", "x.jsonl",
                         "--budget", "350", "--train-size", "1200", "--dry-run", "--out", tmp_path / "v")
    assert code == 0, err  # 350 rollouts: five steps of n = 2 at B_p 32, nothing learned beyond the noise
    assert "n_sat: none" in out and "n_sat = 2" not in out and "n_sat/4" not in out
    assert "centres on the simulated n* = 2" in out


def test_adaptive_dry_run_describes_the_search(cache, tmp_path, monkeypatch, capsys):
    pytest.importorskip("transformers")
    code, out, err = run(monkeypatch, capsys, "validate", "--model", "smollm2-135m", "--data", "x.jsonl",
                         "--budget", "100000", "--train-size", "1200", "--quick", "--dry-run", "--adaptive",
                         "--out", tmp_path / "v")
    assert code == 0, err
    assert "n given by --n" not in out and "every power of two from 2" in out
    assert "one after another" not in out
    assert "search (adaptive): starts n = " in out and "C/32, C/16, C/8, C/4, C/2" in out
    code, out, err = run(monkeypatch, capsys, "validate", "--model", "smollm2-135m", "--data", "x.jsonl",
                         "--budget", "100000", "--train-size", "1200", "--quick", "--dry-run", "--adaptive",
                         "--n", "4,16,64", "--out", tmp_path / "v2")
    assert code == 0 and "n given by --n" in out
    code, out, err = run(monkeypatch, capsys, "validate", "--model", "smollm2-135m", "--data", "x.jsonl",
                         "--budget", "100000", "--train-size", "1200", "--quick", "--dry-run", "--adaptive",
                         "--search", "sbi", "--out", tmp_path / "v3")
    assert code == 0, err
    assert "search (sbi): every n of [2, 4, 8" in out and "C/32, C/16, C/8, C/4 rollouts" in out
    assert "C/2" not in out and "sbi-band" in out and "regret at C = 100000" in out


def test_validate_without_the_llm_extra_says_how_to_install_it_before_planning(tmp_path, monkeypatch, capsys):
    import importlib.util

    from llm_runs.launch import validate as val

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "accelerate" else real(name, *a))

    def planned(*a, **kw):
        raise AssertionError("validate planned runs before checking the [llm] extra")

    monkeypatch.setattr(val, "predict", planned)
    code, _, err = run(monkeypatch, capsys, "validate", "--model", "smollm2-135m", "--data", "x.jsonl",
                       "--budget", "100000", "--train-size", "1200", "--out", tmp_path / "v")
    one_line_error(code, err, "pip install -e '.[llm]'", "accelerate")
    assert not (tmp_path / "v").exists()
