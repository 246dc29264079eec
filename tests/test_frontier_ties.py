"""Ties, noise and saturation in the frontier analysis, on synthetic frontiers with a known truth.

Each truth comes with a planted failure: the same check run on data from a different truth
must fail, so the checks can fail.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from rich.console import Console

from isosim.frontier import analysis as an
from isosim.frontier import report
from test_analysis import N_VALUES, make_records  # the same synthetic records, other truths


def records(curve, rng: np.random.Generator, *, sd: float = 0.003, **kw) -> pd.DataFrame:
    """Runs of every n and seed drawn from ``curve(n, c)`` with Gaussian noise per row."""
    return make_records(0, 0.0, rng, curve=curve, sd=sd, **kw)


def flat_top(top: int, rise: float = 0.0008):
    """A rises with log2 n up to ``top``, then by only ``rise`` per octave (a tie within 0.005)."""
    k_top = np.log2(top)

    def curve(n, c):
        a = 0.5 + 0.3 * min(np.log2(n), k_top) / k_top + rise * max(0.0, np.log2(n / top))
        with np.errstate(divide="ignore"):
            return 0.3 + (a - 0.3) / (1 + (200.0 * n / np.asarray(c, float)) ** 1.5)

    return curve


@pytest.fixture(scope="module")
def tied():
    """n from 64 up tie within 0.0032 at large budgets; the argmax drifts to the top of the grid."""
    df = records(flat_top(64), np.random.default_rng(1))
    return df, an.analyze(df, n_boot=40, seed=0)


def test_flat_top_n_tol_is_the_smallest_tied_n(tied):
    _, res = tied
    assert res["n_tol"][-1] == 64
    assert res["n_star"][-1] >= 512, "the argmax lands near the top of the tied range"
    assert res["n_tie_hi"][-1] >= res["n_star"][-1]
    assert 45 <= res["fit_tol"]["n_sat"] <= 91, res["fit_tol"]
    assert res["fit_tol"]["saturated"] is True


def test_flat_top_argmax_fit_is_flagged_not_saturated(tied):
    _, res = tied
    fit = res["fit"]
    assert fit["n_sat"] >= 1024 / 2**0.5 and fit["saturated"] is False
    assert any("not seen" in w for w in res["warnings"])
    lo, hi = fit["n_sat_ci"]
    assert lo <= 91 and hi >= 724, "the interval covers the tie, not only the argmax"
    assert fit["n_sat_ci_argmax"][0] > 91, "the argmax fit alone would have hidden the tie"


def test_flat_top_planted_failure_other_top():
    """Data whose curves keep rising to 256: the same checks must fail."""
    df = records(flat_top(256), np.random.default_rng(2))
    res = an.analyze(df, n_boot=0)
    assert res["n_tol"][-1] != 64
    assert not 45 <= res["fit_tol"]["n_sat"] <= 91


def test_tol_zero_is_the_argmax(tied):
    df, _ = tied
    res = an.analyze(df, n_boot=0, tol=0.0)
    assert res["n_tol"] == res["n_star"]


def test_flat_top_summary_and_json_show_the_band(tied, tmp_path, capsys):
    _, res = tied
    row = report.summary_rows(res)[-1]
    assert row[2] == f"64-{res['n_tie_hi'][-1]}" and row[4] == "yes"
    report.print_summary(res, title="t", out_dir=tmp_path, console=Console(width=400))
    text = capsys.readouterr().out
    assert "n_sat_tol" in text and "warning:" in text and "not saturated" in text
    an.write_frontier_json(res, tmp_path / "frontier.json")
    assert '"n_tol"' in (tmp_path / "frontier.json").read_text()


# ---- a no-learning region ---------------------------------------------------------------------
def late_start(c_mid: float):
    def curve(n, c):
        a = 0.3 + 0.2 * min(n, 64) / 64
        with np.errstate(divide="ignore"):
            return 0.3 + (a - 0.3) / (1 + (c_mid / np.asarray(c, float)) ** 2.0)

    return curve


def true_gain(curve, budgets):
    return np.max([curve(n, budgets) for n in N_VALUES], axis=0) - 0.3


def test_no_learning_budgets_are_marked_and_left_out():
    curve = late_start(3e6)
    df = records(curve, np.random.default_rng(3))
    res = an.analyze(df, n_boot=0)
    b, learning = np.asarray(res["budgets"]), np.asarray(res["learning"])
    gain, noise = true_gain(curve, b), res["noise"]
    assert res["noise_from"] == "seeds" and 0.002 < noise < 0.004  # rows drawn with sd 0.003
    assert not learning[gain < noise / 2].any()
    assert learning[gain > 4 * noise].all()
    assert (~learning).sum() >= 5
    assert res["fit"]["budgets_used"] == learning.sum() == res["fit_tol"]["budgets_used"]
    assert any("no gain over the base reward" in w for w in res["warnings"])


def test_no_learning_planted_failure_earlier_start():
    """Learning that starts 30x earlier: the mask no longer matches the late truth."""
    df = records(late_start(1e5), np.random.default_rng(3))
    res = an.analyze(df, n_boot=0)
    b, learning = np.asarray(res["budgets"]), np.asarray(res["learning"])
    late = true_gain(late_start(3e6), b)
    assert learning[late < res["noise"] / 2].any()


def test_nothing_learned_gives_no_fit(tmp_path, capsys):
    df = records(lambda n, c: np.full(len(c), 0.3), np.random.default_rng(4))
    res = an.analyze(df, n_boot=5)
    assert not any(res["learning"])
    assert res["fit"]["n_sat"] is None and res["fit_tol"]["n_sat"] is None
    report.print_summary(res, title="t", out_dir=tmp_path, console=Console(width=400))
    assert "no budget shows learning" in capsys.readouterr().out
    an.write_frontier_json(res, tmp_path / "frontier.json")
    from isosim.frontier import plots

    assert plots.plot_n_star(res, tmp_path / "n_star")[0].is_file()


def test_nothing_learned_with_one_seed_names_the_noise_it_read_not_a_seed_noise():
    """One run per n: the noise is read from each run's scatter around its fit, and the reason and
    the warning say so (a sweep with seeds says "the seed noise")."""
    flat = lambda n, c: np.full(len(c), 0.3)  # noqa: E731
    one = an.analyze(make_records(0, 0.0, np.random.default_rng(4), curve=flat, sd=0.003, seeds=1), n_boot=0)
    assert one["noise_from"] == "residuals" and one["fit"]["n_sat"] is None
    assert "one seed per n" in one["fit"]["reason"] and "seed noise" not in one["fit"]["reason"]
    assert any("one seed per n" in w for w in one["warnings"])
    two = an.analyze(make_records(0, 0.0, np.random.default_rng(4), curve=flat, sd=0.003, seeds=2), n_boot=0)
    assert two["noise_from"] == "seeds" and two["fit"]["reason"] == "no budget shows learning beyond the seed noise"


# ---- a true saturation --------------------------------------------------------------------------
def saturating(sat: int):
    def curve(n, c):
        a = 0.5 + 0.3 * (1 - np.exp(-min(n, sat) / 16)) - 0.02 * max(0.0, np.log2(n / sat))
        with np.errstate(divide="ignore"):
            return 0.3 + (a - 0.3) / (1 + (2e3 * n / np.asarray(c, float)) ** 1.0)

    return curve


def test_true_saturation_is_saturated():
    res = an.analyze(records(saturating(32), np.random.default_rng(5)), n_boot=0)
    assert res["fit"]["saturated"] is True and 16 <= res["fit"]["n_sat"] <= 64
    assert not any("not seen" in w for w in res["warnings"])


def test_true_saturation_planted_failure_grid_ends_at_it():
    """The same truth on a grid that stops at n = 32: saturation cannot be seen."""
    res = an.analyze(records(saturating(32), np.random.default_rng(5), n_values=[4, 8, 16, 32]), n_boot=0)
    assert res["fit"]["saturated"] is False


# ---- bounds and the bootstrap -------------------------------------------------------------------
def test_a_step_in_n_star_puts_the_slope_on_its_bound():
    b = np.geomspace(1e3, 1e6, 25)
    step = an.fit_n_star(b, np.where(b < 3e4, 4, 16), n_bounds=(4, 64))
    assert "slope" in step.at_bound and step.slope == pytest.approx(30.0)
    smooth = an.fit_n_star(b, 2 ** (2 + 2 / (1 + np.exp(-1.5 * (np.log10(b) - 4.5)))), n_bounds=(4, 64))
    assert "slope" not in smooth.at_bound  # planted: a gradual rise is determined by the data


def test_one_seed_per_n_bootstrap_is_not_degenerate():
    df = records(saturating(32), np.random.default_rng(6), seeds=1, sd=0.01)
    res = an.analyze(df, n_boot=30, seed=0)
    assert res["noise_from"] == "residuals" and res["noise"] > 0
    lo, hi = res["fit"]["n_sat_ci_argmax"]
    assert hi > lo, "resampling the points of single runs gives a real interval"
