"""What ``isosim explore`` checks before it spends anything, and what it says while it runs:
flags a plan fixes refused with one line, an unknown metric or an absent device refused before any
simulation or folder, a start line and progress lines when no terminal shows a bar, progress
counted in simulation cost (not rollouts), and why a tabular policy's validation cannot move."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest

from isosim.errors import IsosimError

ROOT = Path(__file__).resolve().parents[1]


from cli_helpers import one_line_error, run  # noqa: E402  (tests/cli_helpers.py)


@pytest.fixture
def no_sweep(monkeypatch):
    """Fail the test if a sweep starts."""
    from isosim.sweeps import sweep

    def refuse(*a, **kw):
        raise AssertionError("a sweep was started")

    monkeypatch.setattr(sweep, "run_sweep", refuse)


@pytest.fixture
def plan_file(tmp_path):
    from isosim.sweeps import sweep

    path = tmp_path / "plan.json"
    path.write_text(sweep.plan_for_preset("hard", "q1", quick=True, seeds=1).to_json())
    return path


@pytest.mark.parametrize("flag", [["--preset", "easy"], ["--seeds", "3"], ["--seed", "1"], ["--question", "q2"],
                                  ["--budget-max", "1e5"], ["--quick"], ["--policy", "tabular"],
                                  ["--allocation", "uniform"]])
def test_explore_refuses_what_the_plan_fixes(flag, plan_file, tmp_path, monkeypatch, capsys, no_sweep):
    code, _, err = run(monkeypatch, capsys, "explore", "--plan", plan_file, *flag, "--out", tmp_path / "e")
    one_line_error(code, err, flag[0], "with --plan", "the plan fixes")
    assert not (tmp_path / "e").exists()


def test_explore_names_every_flag_that_clashes_with_the_plan(plan_file, tmp_path, monkeypatch, capsys, no_sweep):
    code, _, err = run(monkeypatch, capsys, "explore", "--plan", plan_file, "--preset", "easy", "--seeds", "2",
                       "--out", tmp_path / "e")
    one_line_error(code, err, "--preset, --seeds with --plan")


def test_explore_help_says_what_the_plan_fixes(monkeypatch, capsys):
    code, out, _ = run(monkeypatch, capsys, "explore", "--help")
    assert code == 0
    text = " ".join(out.split())
    assert "the plan fixes the runs" in text and "--seeds" in text


def test_explore_refuses_an_unknown_metric_before_simulating(tmp_path, monkeypatch, capsys, no_sweep):
    code, _, err = run(monkeypatch, capsys, "explore", "--quick", "--metric", "val_avgg", "--out", tmp_path / "e")
    one_line_error(code, err, "--metric 'val_avgg'", "val_avg", "train_reward")
    assert not (tmp_path / "e").exists()
    monkeypatch.chdir(tmp_path)
    code, _, err = run(monkeypatch, capsys, "explore", "--quick", "--metric", "val_avgg")  # the default folder
    assert code == 2 and not (tmp_path / "runs").exists(), err


def test_every_metric_explore_accepts_is_in_the_records(tmp_path):
    from isosim.sim.config import SimConfig
    from isosim.sim.engine import simulate
    from isosim.sim.engine.evaluation import metric_names

    from isosim.records import SAMPLED_METRICS, SIMULATED_METRICS

    assert metric_names() == SIMULATED_METRICS and metric_names(sampled=True) == SIMULATED_METRICS + SAMPLED_METRICS
    for samples in (0, 8):
        df = simulate(SimConfig(n=4, b_p=4, budget=64, n_train=16, n_val=16, eval_samples=samples))
        assert set(metric_names(sampled=bool(samples))) <= set(df.columns)
        assert not ({"val_avg_sampled"} & set(metric_names(sampled=False)))


@pytest.mark.parametrize("device", ["cuda", "cuda:0", "tpu"])
def test_explore_refuses_a_device_it_cannot_use_before_making_a_folder(device, tmp_path, monkeypatch, capsys,
                                                                       no_sweep):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.chdir(tmp_path)
    code, _, err = run(monkeypatch, capsys, "explore", "--quick", "--device", device)
    one_line_error(code, err, f"--device {device}" if device != "tpu" else "--device must be cpu or cuda")
    assert not (tmp_path / "runs").exists()


def test_a_tabular_policy_says_why_validation_cannot_move(tmp_path, monkeypatch, capsys):
    from isosim.sweeps import sweep

    def stop(*a, **kw):
        raise IsosimError("stopped before simulating")

    monkeypatch.setattr(sweep, "run_sweep", stop)
    code, out, _ = run(monkeypatch, capsys, "explore", "--quick", "--policy", "tabular", "--out", tmp_path / "t")
    assert code == 2
    assert "no transfer to held-out problems" in out and "--metric train_reward" in out
    code, out, _ = run(monkeypatch, capsys, "explore", "--quick", "--policy", "tabular", "--metric", "train_reward",
                       "--out", tmp_path / "t2")
    assert "no transfer" not in out  # the training metric can move: nothing to say
    code, out, _ = run(monkeypatch, capsys, "explore", "--quick", "--out", tmp_path / "l")
    assert "no transfer" not in out


def test_explore_piped_prints_a_start_line_before_simulating(tmp_path, monkeypatch, capsys):
    """Without a terminal there is no bar: a line says at once what is simulated."""
    from isosim.sweeps import store

    seen = []

    def simulate(configs, device="cpu", progress=None):
        seen.append(capsys.readouterr().err)
        raise IsosimError("stopped in the engine")

    monkeypatch.setattr(store, "_default_simulate", lambda: simulate)
    code, _, _ = run(monkeypatch, capsys, "explore", "--quick", "--out", tmp_path / "e")
    assert code == 2 and len(seen) == 1
    assert re.search(r"sweep \w+: simulating 1.2e\+06 of 1.2e\+06 rollouts", seen[0]), seen


def test_progress_is_counted_in_simulation_time_not_rollouts(tmp_path, monkeypatch):
    """Large-n runs spend most rollouts in a few steps: a bar in rollouts reached ~83 % at half the
    engine's time (its ETA ~5x too low). Counted in run-steps, the share follows the time. Time is
    this process's CPU time, not the wall clock, so that other load on the machine does not move it."""
    from isosim.sim.config import SimConfig
    from isosim.sweeps import store
    from isosim.sweeps.sweep import plan_q1, run_sweep

    monkeypatch.setattr(store, "LOG_EVERY_S", 0.0)  # a line at every step
    plan = plan_q1(SimConfig(n_train=64, n_val=64, profile="easy"), [4, 64, 512], b_p=8, budget=8 * 512 * 40,
                   seeds=2)
    lines = []
    run_sweep(plan, tmp_path / "s", progress=True, log=lambda s: lines.append((time.process_time(), s)))
    assert "simulating" in lines[0][1]
    steps = [(t, int(m[1]) / 100, float(m[2]) / float(m[3])) for t, s in lines[1:]
             if (m := re.search(r"(\d+)% of the simulation time done; ([\d.e+]+) of ([\d.e+]+) rollouts", s))]
    assert len(steps) > 1000 and steps[-1][1:] == (1.0, 1.0)
    t0, t1 = steps[0][0], steps[-1][0]
    _, share, rollouts = min(steps, key=lambda p: abs(p[0] - (t0 + t1) / 2))
    assert rollouts > 0.75  # the rollouts are mostly spent by half time ...
    assert 0.3 < share < 0.7, (share, rollouts)  # ... the reported share is not


# --------------------------------------------------------------------------------------------
# predict --runs reads what analyze reads
# --------------------------------------------------------------------------------------------
def test_predict_reads_a_records_table_as_it_reads_the_run_folders(tmp_path, monkeypatch, capsys):
    import json

    from isosim.integrations import load_runs

    runs = ROOT / "studies/results/organism/real/easy"
    df, _ = load_runs(runs)
    df.to_csv(tmp_path / "easy.csv", index=False)
    entries = {}
    for name, source in (("folders", runs), ("csv", tmp_path / "easy.csv")):
        code, out, err = run(monkeypatch, capsys, "predict", "--runs", source, "--max-rollouts", "5e3",
                             "--budget", "4e4", "--n-boot", "0", "--out", tmp_path / "p.json", "--key", name)
        assert code == 0, err
        entries[name] = json.loads((tmp_path / "p.json").read_text())[name]
    a, b = entries["folders"], entries["csv"]
    assert a["cheap"]["run_ids"] == b["cheap"]["run_ids"] and a["cheap"]["records_used"] == b["cheap"]["records_used"]
    assert a["n_star"] == b["n_star"] and a["final_val_avg"] == pytest.approx(b["final_val_avg"], abs=1e-5)
    # a W&B export (one column per run, no isosim columns) with analyze's --map and per-run settings
    panel = df.pivot_table(index="step", columns="run_id", values="val_avg")
    panel.columns = [f"{run} - eval/acc" for run in panel.columns]
    panel.rename_axis("Step").reset_index().to_csv(tmp_path / "panel.csv", index=False)
    settings = df.groupby("run_id")[["n", "b_p", "seed"]].first().rename_axis("run").reset_index()
    settings.to_csv(tmp_path / "settings.csv", index=False)
    code, out, err = run(monkeypatch, capsys, "predict", "--runs", tmp_path / "panel.csv", "--map", "val_avg=eval/acc",
                         "--run-settings", tmp_path / "settings.csv", "--max-rollouts", "5e3", "--budget", "4e4",
                         "--n-boot", "0", "--out", tmp_path / "p.json", "--key", "wandb")
    assert code == 0, err
    c = json.loads((tmp_path / "p.json").read_text())["wandb"]
    assert c["cheap"]["records_used"] == a["cheap"]["records_used"] and c["n_star"] == a["n_star"]
    code, _, err = run(monkeypatch, capsys, "predict", "--runs", tmp_path / "easy.csv", "--max-rollouts", "5e3",
                       "--budget", "4e4", "--n", "999", "--n-boot", "0", "--out", tmp_path / "q.json")
    one_line_error(code, err, "--n 999", "no runs with n = 999")


# --------------------------------------------------------------------------------------------
# figures: readable tick labels, legends beside the data
# --------------------------------------------------------------------------------------------
def _visible_labels(fig, axis):
    """(text, window box) of the labelled ticks inside the view of ``axis``, left to right."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    lo, hi = sorted(axis.get_view_interval())
    out = []
    for minor in (False, True):
        for loc, label in zip(axis.get_ticklocs(minor=minor), axis.get_ticklabels(minor=minor)):
            if lo <= loc <= hi and label.get_visible() and label.get_text():
                out.append((label.get_text(), label.get_window_extent(renderer)))
    return sorted(out, key=lambda t: t[1].x0)


@pytest.mark.parametrize("span", [(2e4, 6e5), (3e4, 2e5), (5e4, 1.1e5), (1e5, 1.3e5), (256, 1e7)])
def test_compute_axis_labels_never_run_together(span):
    """matplotlib's default labels minor ticks below ~1.5 decades, where they overlap (2e4-6e5)."""
    from isosim.frontier import plots

    fig, (ax,) = plots.figure()
    ax.plot(span, [0.4, 0.6])
    plots.log_compute_axis(ax)
    labels = _visible_labels(fig, ax.xaxis)
    assert len(labels) >= 3, labels
    for (_, a), (_, b) in zip(labels, labels[1:]):
        assert a.x1 + 2 <= b.x0, [t for t, _ in labels]
    assert all("times" not in t and "^" not in t for t, _ in labels)  # short: 2e4, not 2x10^4


def test_the_frontier_figures_use_the_readable_compute_axis(monkeypatch):
    from isosim.frontier import plots

    called = []
    real = plots.log_compute_axis
    monkeypatch.setattr(plots, "log_compute_axis", lambda ax, *a: called.append(ax) or real(ax, *a))
    result = {"budgets": [2e4, 5e4, 1e5, 3e5], "n_star": [4, 8, 8, 16], "metric": "val_avg", "n_values": [4, 8, 16],
              "fit": {}, "x": "rollouts"}
    fig = plots.n_star_figure(result)
    labels = _visible_labels(fig, fig.axes[0].xaxis)
    assert called and [t for t, _ in labels][:3] == ["2e4", "5e4", "1e5"]
    plots.metric_split_figure({"val_avg": result})
    assert len(called) == 2


def test_the_calibration_histogram_counts_whole_problems_and_keeps_its_legend_off_the_bars():
    from llm_runs.launch.calibrate import histogram_figure

    rates = [1.0, 1.0, 0.75, 0.5]  # the tallest bar at 1.0, where the legend sat; counts of 1 and 2
    fig = histogram_figure(rates, 4, title="tiny")
    ax = fig.axes[0]
    labels = _visible_labels(fig, ax.yaxis)
    assert labels and all(float(t.replace("\N{MINUS SIGN}", "-")) == int(float(t.replace("\N{MINUS SIGN}", "-")))
                          for t, _ in labels), [t for t, _ in labels]
    renderer = fig.canvas.get_renderer()
    legend = ax.get_legend().get_window_extent(renderer)
    bars = [b.get_window_extent(renderer) for b in ax.containers[0] if b.get_height() > 0]
    assert len(bars) == 3 and not any(legend.overlaps(b) for b in bars), "the legend covers a bar"


# --------------------------------------------------------------------------------------------
# docs that quote a command's output say what the command prints
# --------------------------------------------------------------------------------------------
def test_the_qwen_slurm_plan_in_the_docs_is_the_dry_runs(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("ISOSIM_CACHE", str(tmp_path / "cache"))
    code, out, err = run(monkeypatch, capsys, "validate", "--model", "Qwen/Qwen2.5-7B-Instruct", "--data",
                         "problems.jsonl", "--budget", "2000000", "--train-size", "1200", "--launcher", "slurm",
                         "--dry-run", "--out", tmp_path / "v")
    assert code == 0, err
    m = re.search(r"plan: n = \[([\d, ]+)\] at B_p = (\d+)", out)
    ns, b_p = [int(x) for x in m[1].split(",")], int(m[2])
    doc = " ".join((ROOT / "docs/analysis.md").read_text(encoding="utf-8").split())
    assert f"n = {' / '.join(map(str, ns))} at B_p = {b_p}" in doc
    steps = [int(2_000_000 // (b_p * n)) for n in ns]
    assert f"{steps[0]}, {steps[1]} and {steps[2]} steps" in doc and "under FSDP" in doc and "fsdp" in out


def test_the_validation_summary_defines_its_terms_where_it_first_uses_them():
    text = " ".join((ROOT / "docs/validation.md").read_text(encoding="utf-8").split())  # the README's numbers moved here
    for term in ("the plane", "regret", "overhead", "cheap leader", "rung", "frozen"):
        first = text.lower().index(term)
        assert text[first - 1] == "*" and text[first + len(term)] == "*", (term, text[first - 80: first + 80])
    assert text.index("`sbi-band`:") == text.index("sbi-band") - 1  # defined where first named
    assert text.index('"a at b"') < text.index(".0074 at .19")  # the units of "regret at overhead"
    assert text.index("*rung*") < text.index("C/32")
    assert "(a pass rate)" in text[: text.index(".0074 at .19")]


def test_the_validation_summary_scores_the_long_predictions_as_the_plane_does_and_names_every_late_peak():
    import json

    from isosim.validation.scoreboard import prediction_picks

    text = " ".join((ROOT / "docs/validation.md").read_text(encoding="utf-8").split())  # the README's numbers moved here
    long = ROOT / "studies/results/organism_long"
    pred = json.loads((long / "prediction_calibrated.json").read_text())
    picks = [prediction_picks(pred[s], [2e6])[0] for s in ("hard-128-long", "hard-512-long")]
    assert f"`isosim predict` {picks[0]} / {picks[1]} (" in text  # n_tol, the pick the plane scores
    measured = json.loads((long / "measured.json").read_text())
    late = sorted(r for s in ("hard-128-long", "hard-512-long")
                  for v in measured[s]["plateaus"]["per_n"].values() for r in v["peak_rollouts"] if r > 2.7e5)
    assert late and all(f"{r:.1e}".replace("e+0", "e") in text for r in late), late
    assert "all by 2.7e5 but hard-512's n = 128 runs" in text


HARD = str(ROOT / "studies/results/organism_hard/hard-128")
EASY = str(ROOT / "studies/results/organism/splits/easy.jsonl")


@pytest.mark.parametrize("args, words", [
    (["explore", "--preset", "easy", "--quick", "--seed", "-1"], ["--seed"]),  # was a numpy traceback
    (["analyze", HARD, "--seed", "-1"], ["--seed"]),
    (["plan", "--for", "trl", "--budget", "2e6", "--nodes", "0"], ["--nodes"]),  # was "--processes 1 must split ..."
    (["plan", "--for", "trl", "--budget", "2e6", "--seed", "-2"], ["--seed"]),
    (["recommend", "--budget", "2e6", "--problems", "-3"], ["--problems", "-3"]),  # the flag the user typed
    (["calibrate", "--model", "x", "--data", "y", "--vllm-memory", "2"], ["--vllm-memory", "between 0 and 1"]),
    (["calibrate", "--model", "x", "--data", "y", "--seed", "-1"], ["--seed"]),
    (["calibrate", "--dynamics", HARD, "--profile", "p.json", "--max-evals", "0"], ["--max-evals"]),
    (["calibrate", "--dynamics", HARD, "--profile", "p.json", "--seeds", "0"], ["--seeds"]),
    (["validate", "--model", "organism", "--data", EASY, "--budget", "4096", "--time-min", "0", "--dry-run"], ["--time-min"]),
    (["validate", "--model", "organism", "--data", "/nonexistent.jsonl", "--budget", "4096", "--dry-run"],
     ["--data /nonexistent.jsonl", "no such data file"]),  # before the prediction's simulated sweep
])
def test_every_flag_is_checked_before_any_work(args, words, tmp_path, monkeypatch, capsys, no_sweep):
    """Flags found unchecked by an audit of every command (each numeric flag at 0, -1, nan, inf, each
    named choice misspelt): each is now one line and exit 2 before anything runs or is written."""
    monkeypatch.chdir(tmp_path)
    code, out, err = run(monkeypatch, capsys, *args, *(["--out", tmp_path / "o"] if args[0] != "recommend" else []))
    one_line_error(code, err, *words)
    assert not (tmp_path / "o").exists() and "predicting" not in out
