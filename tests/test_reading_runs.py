"""Reading a user's runs back: what the numbers rest on (evaluation size, metric, seeds), --metric
applied or refused, no silent switch to the training reward, a cheap part that can carry a pick,
unfinished sweeps and damaged files said as such."""

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest

from test_damaged_runs import run_cli, write_runs, damage


def one_line(code: int, err: str, *words: str) -> str:
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("isosim: error:"), err
    for w in words:
        assert w in lines[0], (w, lines[0])
    return lines[0]


def flat(text: str) -> str:
    return " ".join(text.split())


def quoted_se(text: str) -> float:
    """The se of a difference between two n a reader quotes."""
    import re

    return float(re.search(r"se of a difference between two n (?:is the evaluation noise alone, |at )([0-9.]+) at",
                           flat(text)).group(1))


@pytest.fixture
def runs(tmp_path):
    root = tmp_path / "runs"
    root.mkdir()
    damage(root, write_runs(root), [], 0)
    return root


# ----------------------------------------------------------------------------------------------
# 1. what the numbers rest on: logs (W&B, verl) say their evaluation size only through --set
# ----------------------------------------------------------------------------------------------
def test_a_wandb_export_says_the_evaluation_size_it_assumed_or_was_given(tmp_path):
    from test_first_hour import write_export

    csv = write_export(tmp_path / "run.csv")
    code, out, err = run_cli("recommend", "--runs", csv, "--budget", "1e5", "--map", "val_avg=eval/accuracy")
    assert code == 0, err
    assert "evaluation: not recorded: assumed 2,400 answers per evaluation" in flat(out)
    code, out, err = run_cli("recommend", "--runs", csv, "--budget", "1e5", "--map", "val_avg=eval/accuracy",
                             "--set", "val_size=16,eval_n=4", "--json")
    assert code == 0, err
    got = json.loads(out)
    assert got["eval_samples"] == 64 and got["metric"] == "val_avg"
    code, text, err = run_cli("recommend", "--runs", csv, "--budget", "1e5", "--map", "val_avg=eval/accuracy",
                              "--set", "val_size=16,eval_n=4")
    code2, ana, err2 = run_cli("analyze", csv, "--map", "val_avg=eval/accuracy", "--set", "val_size=16,eval_n=4",
                               "--n-boot", "0", "--out", tmp_path / "a")
    assert code == 0 and code2 == 0, err + err2
    for t in (text, ana):
        assert "16 prompts x 4 samples = 64 answers per evaluation (records)" in flat(t)
        assert "2 seeds per n" in flat(t)
    assert quoted_se(text) == pytest.approx(quoted_se(ana), rel=0.10)


def test_verl_logs_take_their_evaluation_size_from_set(tmp_path):
    pytest.importorskip("tensorboard")
    from test_integrations import _write_verl_run

    root = tmp_path / "tensorboard_log" / "gsm8k"
    _write_verl_run(root / "qwen_n4", 4, 16)
    _write_verl_run(root / "qwen_n16", 16, 16)
    sets = ["--set", "qwen_n4:n=4,b_p=16", "--set", "qwen_n16:n=16,b_p=16", "--set", "val_size=32,eval_n=4"]
    code, out, err = run_cli("recommend", "--runs", root, "--budget", "5e4", *sets, "--json")
    assert code == 0, err
    got = json.loads(out)
    assert got["eval_samples"] == 128 and got["seeds"] == [0]
    regret = {int(n): v["expected_regret"] for n, v in got["n"].items()}
    se = {int(n): v["expected_regret_se"] for n, v in got["n"].items()}
    assert got["tie_band"] == [n for n in sorted(regret) if regret[n] <= 2 * se[n] + 1e-12]
    code, out, err = run_cli("recommend", "--runs", root, "--budget", "5e4", *sets)
    code2, ana, err2 = run_cli("analyze", root, *sets, "--n-boot", "0", "--out", tmp_path / "a")
    assert code == 0 and code2 == 0, err + err2
    for t in (out, ana):
        assert "32 prompts x 4 samples = 128 answers" in flat(t) and "one seed per n" in flat(t)
        assert "seed-to-seed spread" not in t and "metric val_avg" in t
    assert quoted_se(out) == pytest.approx(quoted_se(ana), rel=0.10)


# ----------------------------------------------------------------------------------------------
# 2, 3. --metric applied or refused; no silent switch to the training reward
# ----------------------------------------------------------------------------------------------
def test_recommend_runs_applies_its_metric_or_refuses_it(runs, tmp_path):
    rows = []
    for f in sorted(runs.glob("*/records.jsonl")):
        for r in map(json.loads, f.read_text().splitlines()):
            r["val_best"] = min(1.0, r["val_avg"] * 1.5) if r["n"] != 2 else r["val_avg"]
            r["val_worst"] = r["val_avg"] ** 4
            rows.append(r)
    table = tmp_path / "runs.csv"
    pd.DataFrame(rows).to_csv(table, index=False)
    for metric, col in (("best", "val_best"), ("worst", "val_worst"), (None, "val_avg")):
        code, out, err = run_cli("recommend", "--runs", table, "--budget", "5e5", "--json",
                                 *(["--metric", metric] if metric else []))
        assert code == 0, err
        assert json.loads(out)["metric"] == col
    one_line(*run_cli("recommend", "--runs", table, "--budget", "5e5", "--metric", "foo")[::2], "--metric 'foo'")


def test_logs_without_validation_are_refused_unless_the_training_reward_is_asked_for(tmp_path):
    csv = tmp_path / "train_only.csv"
    rows = [{"Step": s, "name": f"r-n{n}", "n": n, "b_p": 16, "train/reward": 0.2 + 0.01 * s * (n / 4)}
            for n in (2, 4, 8) for s in range(0, 40)]
    pd.DataFrame(rows).to_csv(csv, index=False)
    one_line(*run_cli("recommend", "--runs", csv, "--budget", "5e4")[::2], "no validation", "--metric train_reward")
    code, out, err = run_cli("recommend", "--runs", csv, "--budget", "5e4", "--metric", "train_reward")
    assert code == 0, err
    assert "metric train_reward" in out and "best validated" not in out


# ----------------------------------------------------------------------------------------------
# 6. a pick needs a cheap part that can carry it
# ----------------------------------------------------------------------------------------------
def test_a_cheap_part_below_one_percent_of_c_gets_no_pick(runs):
    # the runs reach 8,192 rollouts: 0.8 % of 1e6, 0.0 % of 1e30
    line = one_line(*run_cli("recommend", "--runs", runs, "--budget", "1e6", "--for", "trl")[::2],
                    "a pick needs a cheap part of at least 1% of C", "give a budget of at most 8.19e+05")
    assert "Traceback" not in line
    # past any plausible run, refused before the runs are read (the budget bound every command shares)
    line = one_line(*run_cli("recommend", "--runs", runs, "--budget", "1e30", "--for", "trl")[::2],
                    "beyond any plausible run", "at most 1e+13")
    assert "Traceback" not in line
    assert not (runs.parent / "full").exists() and not Path(f"{runs}-full").exists()
    code, out, err = run_cli("recommend", "--runs", runs, "--budget", "8e5")
    assert code == 0, err
    # 8,192 of 8e5 is 1 %: a pick, said to rest on a cheaper part than any scored; at 2.5 % no such caveat
    assert "caveat: the cheap part is 1.0% of C, below the 2.5% the readers were scored at" in flat(out)
    code, out, err = run_cli("recommend", "--runs", runs, "--budget", "3.2768e5")
    assert code == 0, err
    assert "caveat: the cheap part" not in out


def test_the_least_cheap_share_lies_below_what_the_plane_scored():
    from isosim.predict.choice import MIN_CHEAP_SHARE, SCORED_SHARE
    from isosim.validation.plane import SHARES

    assert MIN_CHEAP_SHARE < min(SHARES) == SCORED_SHARE == 0.025


# ----------------------------------------------------------------------------------------------
# 4, 8. unfinished sweeps, damaged files, wrong kinds of input
# ----------------------------------------------------------------------------------------------
def test_an_unfinished_explore_folder_is_named_as_such(tmp_path):
    code, _, err = run_cli("explore", "--quick", "--out", tmp_path / "ex")
    assert code == 0, err
    # as a kill (or a sweep still running) leaves it: the runs of the largest n not yet written
    man_path = tmp_path / "ex" / "manifest.json"
    man = json.loads(man_path.read_text())
    chunk = man["chunks"][0]
    table = pd.read_parquet(tmp_path / "ex" / chunk["file"])
    top = int(table["n"].max())
    gone = sorted(table.loc[table["n"] == top, "run_id"].astype(str).unique())
    table = table[table["n"] != top]
    table.to_parquet(tmp_path / "ex" / chunk["file"])
    chunk.update(rows=len(table), run_ids=sorted(set(chunk["run_ids"]) - set(gone)))
    man_path.write_text(json.dumps(man))
    for args in (("analyze", tmp_path / "ex", "--n-boot", "0", "--out", tmp_path / "a"),
                 ("recommend", "--runs", tmp_path / "ex", "--budget", "1e6")):
        code, out, err = run_cli(*args)
        assert code == 0, err
        said = flat(out)
        assert "unfinished sweep (killed, or still running)" in said, out
        assert "planned run(s) without records" in said and gone[0] in said
        assert f"n = {top} cannot be judged" in said


def test_a_cut_off_last_records_line_says_resume(runs):
    """A cut-off last line in a file untouched for an hour: the run was stopped mid-write; the same
    file just written: the run may still be writing it (no advice to resume or delete)."""
    import os
    import time

    f = runs / "n4-s0" / "records.jsonl"
    f.write_text(f.read_text()[:-30])
    old = time.time() - 3600
    os.utime(f, (old, old))
    for args in (("analyze", runs, "--n-boot", "0"), ("recommend", "--runs", runs, "--budget", "5e5")):
        line = one_line(*run_cli(*args)[::2], "is cut off", "resume the run")
        assert "Expected" not in line and "Trailing data" not in line and "still" not in line
    os.utime(f)  # written now
    line = one_line(*run_cli("analyze", runs, "--n-boot", "0")[::2], "is cut off", "may still be writing it")
    assert "resume the run" not in line and "delete" not in line


def test_a_records_csv_missing_n_is_not_called_a_wandb_export(runs, tmp_path):
    rows = [r for f in sorted(runs.glob("*/records.jsonl")) for r in map(json.loads, f.read_text().splitlines())]
    table = tmp_path / "no_n.csv"
    pd.DataFrame(rows).drop(columns=["n"]).to_csv(table, index=False)
    line = one_line(*run_cli("analyze", table, "--n-boot", "0")[::2], "records table missing column(s) n")
    assert "W&B" not in line


def test_a_wandb_folder_with_a_settings_csv_beside_the_exports_is_read(tmp_path):
    from test_first_hour import write_export

    folder = tmp_path / "wandb"
    folder.mkdir()
    write_export(folder / "export.csv")
    (folder / "settings.csv").write_text("run,n,b_p\nrun-n2-s0,2,16\n")
    code, out, err = run_cli("recommend", "--runs", folder, "--budget", "1e5", "--map", "val_avg=eval/accuracy")
    assert code == 0, err
    assert "not read: settings.csv, not W&B exports" in out


def test_the_hint_for_missing_settings_names_only_options_every_reader_has(tmp_path):
    csv = tmp_path / "bare.csv"
    pd.DataFrame([{"Step": s, "name": "a", "eval/reward": 0.3} for s in range(5)]).to_csv(csv, index=False)
    line = one_line(*run_cli("recommend", "--runs", csv, "--budget", "1e5")[::2], "--set a:n=N,b_p=B")
    assert "--runs FILE" not in line


def test_two_lrs_of_one_n_are_not_seeds(runs):
    for f in (runs / "n4-s1" / "records.jsonl",):
        rows = [dict(r, lr=3e-6) for r in map(json.loads, f.read_text().splitlines())]
        f.write_text("".join(json.dumps(r) + "\n" for r in rows))
    for args in (("analyze", runs, "--n-boot", "0"), ("recommend", "--runs", runs, "--budget", "5e5")):
        one_line(*run_cli(*args)[::2], "n = 4 (B_p 8) was run at 2 learning rates", "not seeds")


def test_one_commands_folder_given_to_another_is_one_line(tmp_path):
    from isosim.errors import IsosimError
    from llm_runs.launch.validate import load_or_make_plan

    code, _, err = run_cli("explore", "--quick", "--out", tmp_path / "ex")
    assert code == 0, err
    with pytest.raises(IsosimError, match="holds another command's folder") as got:
        load_or_make_plan(tmp_path / "ex", {}, lambda: None)
    assert "KeyError" not in str(got.value) and "explore" in str(got.value)


def test_a_logged_lr_schedule_is_one_lr_per_run():
    from isosim.records import check_lrs

    warm = pd.DataFrame({"run_id": ["a", "a", "b", "b"], "n": 4, "b_p": 8, "lr": [1e-7, 1e-6, 1e-7, 1e-6]})
    check_lrs(warm)  # both runs warm up alike: one lr


def test_the_updates_at_c_shown_are_whole_steps_as_the_full_run_takes(runs):
    """C / (B_p n) rounded down: the full run's steps (``plan``'s floor), never one more."""
    code, out, err = run_cli("recommend", "--runs", runs, "--budget", "5e5", "--json")
    assert code == 0, err
    r = json.loads(out)
    code, text, err = run_cli("recommend", "--runs", runs, "--budget", "5e5")
    assert code == 0, err
    for n, v in r["n"].items():
        whole = int(5e5 // (int(r["b_p"]) * int(n)))
        assert f"({whole:,} updates at C)" in text and v["steps_at_budget"] >= whole


def test_the_flat_readers_say_what_they_read(runs):
    """level reads each n's last cheap value in both readings, which the line naming it says."""
    code, text, err = run_cli("recommend", "--runs", runs, "--budget", "5e5")
    assert code == 0, err
    assert "reader level (each n's last cheap value carried flat to C, in either reading" in flat(text)
    code, text, err = run_cli("recommend", "--runs", runs, "--budget", "5e5", "--method", "steps")
    assert code == 0, err
    assert "reader steps;" in flat(text)
