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
