"""The figures are written as non-empty PNG and SVG files, and nothing is displayed."""

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
    assert [p.suffix for p in paths] == [".png", ".svg"]
    for p in paths:
        assert p.exists() and p.stat().st_size > 1000
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
    assert titles == ["after C = 2e+04 rollouts per run", "after C = 1e+06 rollouts per run"]
    assert "equal compute" in fig._suptitle.get_text()
