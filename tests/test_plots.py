"""The figures draw what the analysis found (the lines' data, labels and titles are read back from the
matplotlib objects), they are written as PNG and SVG, and nothing is displayed."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from isosim.errors import IsosimError
from isosim.frontier import analysis as an
from isosim.frontier import plots

N_VALUES = [4, 16, 64, 256]


@pytest.fixture(scope="module")
def records() -> pd.DataFrame:
    """Two seeds per n; larger n rises later and higher; histograms spread less for small n."""
    rng = np.random.default_rng(0)
    frames = []
    for n in N_VALUES:
        steps = np.concatenate([[0], np.unique(np.round(np.geomspace(1, 1e6 / (8 * n), 20)))])
        c = steps * 8 * n
        with np.errstate(divide="ignore"):
            base = 0.3 + (0.4 + 0.05 * np.log2(n) - 0.3) / (1 + (300 * n / c))
        for seed in (0, 1):
            hist = rng.dirichlet(np.ones(10) * np.log2(n), size=len(c))
            frames.append(pd.DataFrame({
                "n": n, "b_p": 8, "seed": seed, "step": steps.astype(int), "rollouts": c,
                "val_avg": base + rng.normal(0, 0.004, len(c)),
                "val_best": base + 0.1 + rng.normal(0, 0.004, len(c)),
                "val_worst": base - 0.1 + rng.normal(0, 0.004, len(c)),
                **{f"train_hist_{i}": hist[:, i] for i in range(10)},
            }))
    return pd.concat(frames, ignore_index=True)


def _check(paths: list[Path]) -> None:
    """The two files are a PNG and an SVG (what they show is checked on the figures below)."""
    assert [p.suffix for p in paths] == [".png", ".svg"]
    assert paths[0].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert b"<svg" in paths[1].read_bytes()[:2000]


def test_all_figures_are_written(records, tmp_path):
    result = an.analyze(records, n_boot=20, seed=0)
    _check(plots.plot_frontier(records, result, tmp_path / "frontier"))
    _check(plots.plot_n_star(result, tmp_path / "n_star.png"))  # a suffix is dropped
    _check(plots.plot_metric_split(an.metric_split(records), tmp_path / "sub" / "split"))
    _check(plots.plot_hist_evolution(records, [4, 256], [2e4, 1e6], tmp_path / "hist"))
    no_boot = an.analyze(records, n_boot=0)
    _check(plots.plot_n_star(no_boot, tmp_path / "n_star_no_boot"))
    import matplotlib.pyplot as plt

    assert plt.get_fignums() == []  # no figure went through pyplot: nothing can be shown


def test_bad_plot_input(records, tmp_path):
    with pytest.raises(IsosimError):
        plots.plot_metric_split({}, tmp_path / "x")
    with pytest.raises(IsosimError):
        plots.plot_hist_evolution(records, [4, 256], [], tmp_path / "x")
    with pytest.raises(IsosimError):
        plots.plot_hist_evolution(records, [4, 32], [1e4], tmp_path / "x")


def test_importing_plots_stays_light():
    code = "import sys, isosim.frontier.plots; assert 'matplotlib' not in sys.modules and 'torch' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)


def _capture(monkeypatch):
    """The figures handed to ``plots.save`` (the files are still written)."""
    figs = []
    real = plots.save

    def keep(fig, path):
        figs.append(fig)
        return real(fig, path)

    monkeypatch.setattr(plots, "save", keep)
    return figs


def test_n_star_legend_is_beside_the_data_and_names_the_n_sat_band(records, tmp_path, monkeypatch):
    figs = _capture(monkeypatch)
    result = an.analyze(records, n_boot=20, seed=0)
    assert result["fit"]["n_sat_ci"], "the fixture has an n_sat interval to show"
    plots.plot_n_star(result, tmp_path / "n_star")
    fig = figs[-1]
    ax = fig.axes[0]
    renderer = fig.canvas.get_renderer()
    legend = ax.get_legend()
    box, axes_box = legend.get_window_extent(renderer), ax.get_window_extent(renderer)
    assert box.x0 >= axes_box.x1, "the legend sits right of the axes, over no data"
    assert box.x1 <= fig.bbox.x1 + 1, "and inside the figure"
    labels = [t.get_text() for t in legend.get_texts()]
    assert any("n_sat" in t and "interval" in t for t in labels), labels


def test_pass_hist_titles_say_what_c_is(records, tmp_path, monkeypatch):
    figs = _capture(monkeypatch)
    plots.plot_hist_evolution(records, [4, 256], [2e4, 1e6], tmp_path / "hist")
    fig = figs[-1]
    titles = [ax.get_title() for ax in fig.axes]
    assert titles == ["after C = 2e4 rollouts per run", "after C = 1e6 rollouts per run"]
    assert "equal compute" in fig._suptitle.get_text()


def _lines(ax) -> dict[str, object]:
    return {line.get_label(): line for line in ax.get_lines()}


def test_frontier_figure_draws_each_fitted_curve_and_the_frontier(records, tmp_path, monkeypatch):
    figs = _capture(monkeypatch)
    result = an.analyze(records, n_boot=0)
    plots.plot_frontier(records, result, tmp_path / "frontier")
    ax = figs[-1].axes[0]
    frontier = _lines(ax)["frontier"]
    np.testing.assert_allclose(frontier.get_xdata(), result["budgets"])
    np.testing.assert_allclose(frontier.get_ydata(), result["reward"])
    unlabelled = [line for line in ax.get_lines() if line.get_label().startswith("_")]
    curves = [line for line in unlabelled if line.get_linestyle() == "--"]
    capped = [line for line in unlabelled if line.get_linestyle() == "-"]
    assert len(curves) == len(capped) == len(N_VALUES)  # per n: its sigmoid (dashed) and its capped curve
    for n, line, cap in zip(N_VALUES, curves, capped):
        fit = an.FitResult.from_dict(result["per_n"][str(n)])
        x = line.get_xdata()
        np.testing.assert_allclose(line.get_ydata()[-1], fit.predict(x[-1]))
        want = np.array([np.nan if v is None else v for v in result["per_n_reward"][str(n)]], dtype=float)
        np.testing.assert_allclose(cap.get_ydata(), want)  # min(sigmoid, measured): what the frontier reads


def test_n_star_figure_draws_the_analysis_and_spans_the_grid(records):
    result = an.analyze(records, n_boot=20, seed=0)
    ax = plots.n_star_figure(result).axes[0]
    line = _lines(ax)["n*(C)"]
    np.testing.assert_allclose(line.get_xdata(), result["budgets"])
    np.testing.assert_allclose(line.get_ydata(), result["n_star"])
    np.testing.assert_allclose(_lines(ax)["n_tol(C): smallest tied n"].get_ydata(), result["n_tol"])
    lo, hi = ax.get_ylim()
    assert lo < min(N_VALUES) / 1.3 and hi > max(N_VALUES) * 1.3  # the whole grid, half an octave to spare
    assert ax.get_title() == "n*(C), val_avg"


def _n_sat_patches(ax):
    return [p for p in ax.patches if "n_sat" in str(p.get_label())]


def test_an_n_sat_interval_spanning_the_grid_is_named_not_drawn(records):
    result = an.analyze(records, n_boot=0)
    assert result["fit"]["n_sat"] is not None
    narrow = {**result, "fit": {**result["fit"], "n_sat_ci": [20.0, 40.0]}}
    (band,) = _n_sat_patches(plots.n_star_figure(narrow).axes[0])
    assert "20-40" in band.get_label() and (band.get_y(), band.get_y() + band.get_height()) == (20.0, 40.0)
    whole = {**result, "fit": {**result["fit"], "n_sat_ci": [4.0, 256.0]}}
    ax = plots.n_star_figure(whole).axes[0]
    assert _n_sat_patches(ax) == []  # no band over the whole axis
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert any("4-256" in t and "no information" in t for t in labels), labels


def test_a_flat_sweep_keeps_its_n_star_line_off_the_bottom_axis():
    rng = np.random.default_rng(1)
    rows = []
    for n in (2, 8, 32, 128):
        for seed in (0, 1):
            steps = np.arange(0, 40)
            rows.append(pd.DataFrame({"n": n, "b_p": 16, "seed": seed, "step": steps, "rollouts": steps * 16 * n,
                                      "val_avg": 0.5 + rng.normal(0, 0.005, len(steps))}))
    result = an.analyze(pd.concat(rows, ignore_index=True), n_boot=0)
    ax = plots.n_star_figure(result).axes[0]
    ys = _lines(ax)["n*(C)"].get_ydata()
    lo, hi = ax.get_ylim()
    assert min(ys) / lo >= 2**0.4, (min(ys), lo)  # the smallest n sits half an octave above the bottom
    assert hi >= 128


def test_metric_split_draws_avg_best_and_worst_each_visible(records, tmp_path, monkeypatch):
    from isosim.frontier import report

    figs = _capture(monkeypatch)
    result = report.build_report(records, tmp_path / "rep", n_boot=0)
    split = [f for f in figs if f.axes[0].get_title() == "n*(C) per metric"]
    assert len(split) == 1
    lines = _lines(split[0].axes[0])
    best, worst, avg = lines["val_best: n*"], lines["val_worst: n*"], lines["val_avg: n*"]
    np.testing.assert_allclose(avg.get_ydata(), result["n_star"])
    np.testing.assert_allclose(best.get_ydata(), result["split"]["val_best"]["n_star"])
    np.testing.assert_allclose(worst.get_ydata(), result["split"]["val_worst"]["n_star"])
    # drawn in order avg, best, worst: each later line narrower and on top, so equal n* leave both visible
    assert avg.get_linewidth() > best.get_linewidth() > worst.get_linewidth()
    assert avg.get_zorder() < best.get_zorder() < worst.get_zorder()


def test_pass_hist_has_one_title_every_n_and_a_clean_budget(records, tmp_path, monkeypatch):
    from isosim.frontier import report

    figs = _capture(monkeypatch)
    report.build_report(records, tmp_path / "rep", n_boot=0)
    (fig,) = [f for f in figs if f.axes[0].get_xlabel() == "training pass@1"]
    ax = fig.axes[0]
    assert fig._suptitle is None or fig._suptitle.get_text() == ""  # one title, on the panel
    top = float(records.groupby("n")["rollouts"].max().min())  # 999,424: every n's last evaluation
    assert ax.get_title() == "training pass@1 of each n after C = ~1e6 rollouts per run"
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert labels == [f"n = {n}" for n in N_VALUES]
    rows = an.hist_at_matched_compute(records, N_VALUES, top)
    for n, bars in zip(N_VALUES, ax.containers):
        want = rows.loc[rows["n"] == n, [f"train_hist_{i}" for i in range(10)]].mean().to_numpy()
        np.testing.assert_allclose([b.get_height() for b in bars], want)


@pytest.mark.parametrize("c, text", [(2e5, "2e5"), (199_680, "~2e5"), (1.5e6, "1.5e6"), (500, "500"),
                                     (1e4, "1e4"), (999_424, "~1e6"), (73_143, "~7.3e4")])
def test_budgets_are_printed_short(c, text):
    assert plots.short_budget(c) == text
