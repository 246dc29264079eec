"""Readers of runs never compare n at unequal compute, and print nothing no run had measured
(issues 50 and 49): runs that stopped short of their planned budget, or hold no records, are named;
the answer is read at the budget every run reached, or refused with the short run named."""

from __future__ import annotations

import json
import math
import shutil
import warnings
from pathlib import Path

import pytest

from cli_helpers import one_line_error, run  # tests/cli_helpers.py

EASY = Path(__file__).resolve().parents[1] / "studies" / "results" / "organism" / "real" / "easy"
"""the organism's easy sweep: n = 4..128, two seeds, every run planned (config.json) to 200,000 rollouts"""


def cut_copy(dest: Path, limit: float, runs=("n4_bp16_s0", "n4_bp16_s1")) -> Path:
    """The easy sweep with ``runs`` cut after their last record at or below ``limit`` rollouts."""
    shutil.copytree(EASY, dest)
    for name in runs:
        path = dest / name / "records.jsonl"
        lines = [ln for ln in path.read_text().splitlines() if ln.strip() and json.loads(ln)["rollouts"] <= limit]
        path.write_text("".join(ln + "\n" for ln in lines))
    return dest


def frontier(out: Path) -> dict:
    return json.loads((out / "frontier.json").read_text())


def test_analyze_reads_where_every_run_competes_and_names_the_short_runs(tmp_path, monkeypatch, capsys):
    runs = cut_copy(tmp_path / "easy", 1.07e4)
    code, out, err = run(monkeypatch, capsys, "analyze", runs, "--out", tmp_path / "a", "--n-boot", "0")
    assert code == 0, err
    for name in ("n4_bp16_s0", "n4_bp16_s1"):
        assert f"{name} at 10,688 of 200,000 rollouts" in out
    assert "every n is read at 10,688 rollouts, the budget every run reached" in out
    res = frontier(tmp_path / "a")
    assert res["budgets"][-1] == pytest.approx(10688)  # not 2e5, where n = 4 no longer competes
    assert res["n_star"][-1] == 4


def test_analyze_names_run_folders_without_records(tmp_path, monkeypatch, capsys):
    runs = tmp_path / "easy"
    shutil.copytree(EASY, runs)
    (runs / "n8_bp16_s1" / "records.jsonl").write_text("")
    (runs / "n16_bp16_s1" / "records.jsonl").unlink()
    code, out, err = run(monkeypatch, capsys, "analyze", runs, "--out", tmp_path / "a", "--n-boot", "0")
    assert code == 0, err
    assert "10 runs" in out
    assert "n16_bp16_s1 (no records.jsonl)" in out and "n8_bp16_s1 (empty records.jsonl)" in out


def test_a_run_cut_below_one_step_of_another_n_is_refused_naming_it(tmp_path, monkeypatch, capsys):
    runs = cut_copy(tmp_path / "easy", 192)
    code, _, err = run(monkeypatch, capsys, "analyze", runs, "--out", tmp_path / "a", "--n-boot", "0")
    one_line_error(code, err, "n4_bp16_s0 at 128 of 200,000 rollouts", "n4_bp16_s1 at 128 of 200,000",
                   "the budget every run reached", "n = 16, 32, 64, 128 cannot take one update step")


def test_a_short_run_never_turns_a_side_analysis_into_an_error_about_another_n(tmp_path):
    # read without the common-budget cut: the pass@1 histograms of n = 4 stop at 128 rollouts, before
    # n = 16 has one; the side figure is left out (and said so), the frontier is still answered
    from isosim.frontier import report
    from isosim.integrations import load_runs

    df, _ = load_runs(cut_copy(tmp_path / "easy", 192))
    res = report.build_report(df, tmp_path / "a", n_boot=0)
    assert any("pass_hist figure is left out" in note for note in res["input_notes"])
    assert not (tmp_path / "a" / "pass_hist.png").exists() and (tmp_path / "a" / "frontier.png").exists()
    assert report.hist_budget(df) is None


def _recommend(monkeypatch, capsys, runs, budget):
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        return run(monkeypatch, capsys, "recommend", "--runs", runs, "--budget", budget)


def test_recommend_runs_reads_every_n_where_every_run_reached(tmp_path, monkeypatch, capsys):
    # issue 49, defect 2: both n = 4 runs of the easy sweep cut to 1.07e4 rollouts
    code, out, err = _recommend(monkeypatch, capsys, cut_copy(tmp_path / "easy", 1.07e4), "1e6")
    assert code == 0, err
    assert "n4_bp16_s0 at 10,688 of 200,000 rollouts" in out and "n4_bp16_s1 at 10,688" in out
    assert "cheap part 1.07e+04 rollouts per run" in out and "cheap part 2e+05" not in out
    assert "pick n = 4;" in out


def steps_csv(path: Path) -> Path:
    """Runs of n = 4, 16, 64 at one B_p, each 36 steps long: they end at 1,152, 4,608 and 18,432
    rollouts, and the larger n lead only at their own (larger) ends."""
    rows = ["run_id,n,b_p,seed,step,rollouts,val_avg"]
    for n in (4, 16, 64):
        for seed in (0, 1):
            for step in range(0, 37, 2):
                v = 0.3 + 0.05 * math.log1p(step) + 0.01 * math.log2(n) + 0.003 * seed
                rows.append(f"n{n}-s{seed},{n},8,{seed},{step},{step * 8 * n},{v:.4f}")
    path.write_text("\n".join(rows) + "\n")
    return path


def test_recommend_runs_on_runs_ending_at_unequal_compute_names_them(tmp_path, monkeypatch, capsys):
    code, out, err = _recommend(monkeypatch, capsys, steps_csv(tmp_path / "steps.csv"), "1e5")
    assert code == 0, err
    assert "n4-s0 at 1,152 of 18,432 rollouts" in out and "n16-s1 at 4,608 of 18,432 rollouts" in out
    assert "cheap part 1.15e+03 rollouts per run" in out and "leader moved up" not in out
    assert "pick n = 4;" in out  # at 1,152 rollouts each n has spent the same: n = 4 leads


def test_predict_refuses_a_cheap_part_past_where_a_run_stopped(tmp_path, monkeypatch, capsys):
    runs = cut_copy(tmp_path / "easy", 1.07e4)
    code, _, err = run(monkeypatch, capsys, "predict", "--runs", runs, "--max-rollouts", "2e4", "--budget", "2e5",
                       "--n-boot", "0", "--out", tmp_path / "p.json")
    one_line_error(code, err, "n4_bp16_s0 at 10,688 of 200,000 rollouts", "--max-rollouts 10688")
    assert not (tmp_path / "p.json").exists()


def nan_csv(path: Path) -> Path:
    """Three runs whose val_avg is a number at step 0 only."""
    rows = ["run_id,n,b_p,seed,rollouts,val_avg"]
    rows += [f"r{n},{n},8,0,{k * 512},{'nan' if k else 0.3}" for n in (4, 16, 64) for k in range(6)]
    path.write_text("\n".join(rows) + "\n")
    return path


def test_recommend_runs_on_a_metric_with_no_value_past_step_0_is_one_line(tmp_path, monkeypatch, capsys):
    code, _, err = _recommend(monkeypatch, capsys, nan_csv(tmp_path / "nan.csv"), "1e6")
    one_line_error(code, err, "no val_avg value after step 0")
    assert "RuntimeWarning" not in err


# ----------------------------------------------------------------------------------------------
# No value printed that no run had measured by its budget (issue 49, defect 11)
# ----------------------------------------------------------------------------------------------
def _analyze_easy(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("COLUMNS", "400")
    code, out, err = run(monkeypatch, capsys, "analyze", EASY, "--out", tmp_path / "a", "--n-boot", "0")
    assert code == 0, err
    return out, frontier(tmp_path / "a")


def test_analyze_labels_every_value_read_between_evaluations(tmp_path, monkeypatch, capsys):
    out, res = _analyze_easy(tmp_path, monkeypatch, capsys)
    i = min(range(len(res["budgets"])), key=lambda j: abs(res["budgets"][j] - 1.43e5))
    assert res["reward"][i] > res["measured_by"][i] + 1e-3  # .6932 where no run had passed .6742 by then
    assert res["measured_by"][i] == pytest.approx(0.6742, abs=5e-4)
    rows = [ln for ln in out.splitlines() if ln.count("│") >= 5 and any(ch.isdigit() for ch in ln)]
    assert rows
    for ln in rows:
        budget, value = float(ln.split("│")[1]), ln.split("│")[4].strip()
        j = min(range(len(res["budgets"])), key=lambda k: abs(res["budgets"][k] - budget))
        above = res["reward"][j] > res["measured_by"][j] + 1e-12
        assert value.endswith("*") == above, ln
    assert any(ln.split("│")[4].strip().endswith("*") for ln in rows)
    assert "* interpolated: read between a run's evaluations" in out


def test_analyze_states_the_fitted_n_sat_in_words_true_of_the_n_tried(tmp_path, monkeypatch, capsys):
    out, res = _analyze_easy(tmp_path, monkeypatch, capsys)
    assert min(res["n_values"]) == 4 and 6 not in res["n_values"] and 5 not in res["n_values"]
    lines = " ".join(out.split())
    assert "fitted n_sat = 6 " not in lines and "n_sat_tol = 5 " not in lines
    assert "between the n tried 4 and 8" in lines
    assert "sits at the smallest n tried" not in lines
    assert "within half an octave of the smallest n tried (4)" in lines
    assert "slope = 30.00): not determined by the data" in lines  # the bound is still said
