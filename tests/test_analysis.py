"""Acceptance tests of the frontier analysis (isosim.frontier.analysis) on records with a known truth."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from isosim.errors import IsosimError
from isosim.frontier import analysis as an

N_VALUES = [2**k for k in range(2, 11)]  # 4 .. 1024


# ---- synthetic records drawn from a known frontier -------------------------------------------
def true_params(n: int, sat: int, decline: float) -> tuple[float, float, float, float]:
    """(R0, A, C_mid, B) of the true curve of n: A rises with n up to ``sat``, then flat or falling."""
    a = 0.5 + 0.3 * (1 - np.exp(-min(n, sat) / 64)) - decline * max(0.0, np.log2(n / sat))
    return 0.3, a, 2e3 * n, 1.0


def true_reward(n: int, c: np.ndarray, sat: int, decline: float) -> np.ndarray:
    r0, a, c_mid, b = true_params(n, sat, decline)
    c = np.asarray(c, dtype=float)
    with np.errstate(divide="ignore"):
        return r0 + (a - r0) / (1 + (c_mid / c) ** b)


def true_n_star(budgets: np.ndarray, sat: int, decline: float) -> np.ndarray:
    curves = np.array([true_reward(n, budgets, sat, decline) for n in N_VALUES])
    return np.asarray(N_VALUES)[curves.argmax(axis=0)]


def make_records(
    sat: int, decline: float, rng: np.random.Generator, *, seeds: int = 3, b_p: int = 8,
    c_max: float = 1e8, n_evals: int = 30, sd: float = 0.005, curve=None, n_values=N_VALUES,
) -> pd.DataFrame:
    """Runs of every n and seed: log-spaced eval steps up to ~c_max rollouts, Gaussian noise.

    The truth is ``true_reward(n, c, sat, decline)`` unless a ``curve(n, c)`` is given.
    """
    curve = curve or (lambda n, c: true_reward(n, c, sat, decline))
    frames = []
    for n in n_values:
        batch = b_p * n
        steps = np.concatenate([[0], np.unique(np.round(np.geomspace(1, c_max / batch, n_evals)))])
        c = steps * batch
        for s in range(seeds):
            frames.append(pd.DataFrame({
                "n": n, "b_p": b_p, "seed": s, "step": steps.astype(int), "rollouts": c,
                "val_avg": curve(n, c) + rng.normal(0, sd, len(c)),
            }))
    return pd.concat(frames, ignore_index=True)


TRUTHS = [(256, 0.0), (256, 0.01), (32, 0.01)]  # (saturation n, decline of A per octave past it)


@pytest.fixture(scope="module")
def results() -> dict[tuple[int, float], tuple[pd.DataFrame, dict]]:
    out = {}
    for i, (sat, decline) in enumerate(TRUTHS):
        df = make_records(sat, decline, np.random.default_rng(100 + i))
        out[(sat, decline)] = (df, an.analyze(df, n_boot=30, seed=0))
    return out


@pytest.mark.parametrize("sat,decline", TRUTHS)
def test_recovers_known_frontier(results, sat, decline):
    _, res = results[(sat, decline)]
    budgets = np.asarray(res["budgets"])
    truth = true_n_star(budgets, sat, decline)
    assert len(set(truth)) >= 3, "the truth should rise through several n"
    hit = np.asarray(res["n_star"]) == truth
    assert hit.mean() >= 0.7, f"n* matches the truth on {hit.mean():.0%} of budgets"
    rising = truth > min(N_VALUES)  # where the answer is not simply the smallest n
    assert hit[rising].mean() >= 0.7, f"n* matches on {hit[rising].mean():.0%} of the budgets past n = 4"
    assert sat / 2 <= res["fit"]["n_sat"] <= sat * 2


@pytest.mark.parametrize("sat,decline", TRUTHS)
def test_does_not_match_a_different_truth(results, sat, decline):
    """The same checks against the other saturation point must fail: the test can fail."""
    _, res = results[(sat, decline)]
    other = 32 if sat == 256 else 256
    budgets = np.asarray(res["budgets"])
    assert np.mean(np.asarray(res["n_star"]) == true_n_star(budgets, other, decline)) < 0.7
    assert not other / 2 <= res["fit"]["n_sat"] <= other * 2


def test_analyze_result_shape_and_bootstrap(results):
    _, res = results[(256, 0.01)]
    k = len(res["budgets"])
    assert k == 25 and len(res["n_star"]) == k and len(res["reward"]) == k
    assert res["n_values"] == N_VALUES and res["n_runs"] == 27
    assert all(n in N_VALUES for n in res["n_star"])
    assert np.all(np.diff(res["reward"]) >= -1e-9), "the frontier reward never falls with budget"
    fit = res["fit"]
    for key in ("n_sat_ci", "log_c_mid_ci", "slope_ci"):
        lo, hi = fit[key]
        assert lo <= hi
    assert fit["n_sat_ci"][0] <= fit["n_sat"] * 1.5 and fit["n_sat_ci"][1] >= fit["n_sat"] / 1.5
    band = res["n_star_band"]
    assert all(lo <= hi for lo, hi in zip(band["lo"], band["hi"]))
    assert set(res["per_n"]) == {str(n) for n in N_VALUES}
    assert res["per_n"]["1024"]["min_rollouts"] == 8 * 1024
    json.dumps(res, allow_nan=False)  # JSON-serialisable as is


def test_analyze_is_seeded(results):
    df, _ = results[(256, 0.01)]
    a = an.analyze(df, n_boot=200, seed=7)
    assert a == an.analyze(df, n_boot=200, seed=7)
    assert a != an.analyze(df, n_boot=200, seed=8)  # the seed reaches the bootstrap


def test_frontier_does_not_extrapolate():
    rng = np.random.default_rng(0)
    df = make_records(256, 0.01, rng, seeds=1)
    short = (df["n"] == 1024) & (df["rollouts"] > 1e6)
    fr = an.frontier(df[~short])  # n = 1024 stops at 1e6 rollouts
    i = N_VALUES.index(1024)
    assert np.isnan(fr.rewards[i, fr.budgets > 1.02e6]).all()
    assert np.isnan(fr.rewards[i, fr.budgets < 8 * 1024]).all()  # one step of n = 1024 costs more
    assert np.isfinite(fr.rewards[i, (fr.budgets >= 8 * 1024) & (fr.budgets <= 1e6)]).all()
    assert fr.n_star[0] == 4  # only n = 4 can spend the smallest budget


# ---- record-breaking --------------------------------------------------------------------------
def test_record_breaking_hand_made():
    a = [0.30, 0.305, 0.32, 0.31, 0.325, 0.33, 0.50, 0.49, 0.51]
    b = [0.60, 0.55, 0.58, 0.60, 0.611, 0.70]
    df = pd.concat([
        pd.DataFrame({"n": 4, "b_p": 2, "seed": 0, "step": range(len(a)), "val_avg": a}),
        pd.DataFrame({"n": 8, "b_p": 2, "seed": 0, "step": range(len(b)), "val_avg": b}),
    ])
    df["rollouts"] = df["n"] * df["b_p"] * df["step"]
    rb = an.record_breaking(df.sample(frac=1, random_state=1), "val_avg", bin_width=0.01)
    got = {rid: list(g["step"]) for rid, g in rb.groupby("run_id")}
    # run a: buckets 30 30 32 31 32 33 50 49 51 -> steps 0, 2, 5, 6, 8
    # run b: buckets 60 55 58 60 61 70          -> steps 0, 4, 5
    assert got == {"n4-2-0": [0, 2, 5, 6, 8], "n8-2-0": [0, 4, 5]}
    rb5 = an.record_breaking(df, "val_avg", bin_width=0.05)
    assert list(rb5[rb5["n"] == 4]["step"]) == [0, 6]


# ---- saturating fit ---------------------------------------------------------------------------
def test_fit_saturating_recovers_noiseless_params():
    x = np.concatenate([[0.0], np.geomspace(1e2, 1e7, 40)])
    truth = an.FitResult(r0=0.2, a=0.8, log_c_mid=4.5, b=1.3, loss=0.0, n_points=41)
    fit = an.fit_saturating(x, truth.predict(x))
    np.testing.assert_allclose(fit.params, truth.params, rtol=1e-5, atol=1e-6)
    assert fit.loss < 1e-12 and not fit.flat
    np.testing.assert_allclose(fit.predict([0.0, 10**4.5]), [0.2, 0.5], atol=1e-6)


def test_fit_saturating_degenerate_inputs():
    for x, y in [([0, 10, 100], [0.4, 0.4, 0.4]), ([5.0], [0.3]), ([0, 10], [0.1, 0.5]), ([0, 0, 0], [1, 2, 3])]:
        fit = an.fit_saturating(x, y)
        assert fit.flat and np.isfinite(fit.params).all()
        np.testing.assert_allclose(fit.predict([1.0, 1e6]), np.mean(y))
    with pytest.raises(IsosimError):
        an.fit_saturating([], [])
    with pytest.raises(IsosimError):
        an.fit_saturating([1, 2], [1, 2, 3])


def test_fit_n_star_recovers_and_handles_constant():
    c = np.geomspace(1e3, 1e8, 40)
    truth = an.NStarFit(lo=2.0, hi=8.0, log_c_mid=5.0, slope=2.0, loss=0.0)
    fit = an.fit_n_star(c, truth.predict(c), n_bounds=(4, 1024))
    np.testing.assert_allclose(fit.params, truth.params, atol=1e-5)
    assert fit.n_sat == pytest.approx(256, rel=1e-4)
    flat = an.fit_n_star(c, np.full_like(c, 64))
    assert flat.flat and flat.n_sat == 64


# ---- side analyses ----------------------------------------------------------------------------
def _bp_table() -> pd.DataFrame:
    """Two seeds per (n, b_p) cell, linear in rollouts, so the value at any budget is exact."""
    cells = {(8, 32): 0.50, (8, 128): 0.52, (8, 512): 0.51, (64, 32): 0.60, (64, 128): 0.61, (64, 512): 0.64}
    rows = []
    for (n, b_p), v in cells.items():
        for seed, dev in ((0, -0.01), (1, 0.01)):
            for c in (0.0, 1000.0, 2000.0, 3000.0 if (n, b_p, seed) == (8, 32, 0) else 2000.0):
                rows.append({"n": n, "b_p": b_p, "seed": seed, "rollouts": c,
                             "val_avg": 0.2 + (v + dev - 0.2) * min(c, 2000.0) / 2000.0})
    return pd.DataFrame(rows).drop_duplicates()


def test_bp_sensitivity_exact_spreads():
    out = an.bp_sensitivity(_bp_table())
    assert out["budget"] == 2000.0  # the largest budget every run reached
    assert out["spread_over_b_p_pp"] == pytest.approx((2 + 4) / 2)
    assert out["spread_over_n_pp"] == pytest.approx((10 + 9 + 13) / 3)
    assert out["per_n_spread_pp"] == pytest.approx({"8": 2.0, "64": 4.0})
    cell = {(c["n"], c["b_p"]): c for c in out["cells"]}
    assert cell[(64, 512)]["reward"] == pytest.approx(0.64) and cell[(64, 512)]["n_seeds"] == 2
    half = an.bp_sensitivity(_bp_table(), budget=1000.0)  # half-way: every gap halves
    assert half["spread_over_b_p_pp"] == pytest.approx(1.5)
    assert half["spread_over_n_pp"] == pytest.approx(32 / 6)


def test_metric_split_reads_each_metric():
    rng = np.random.default_rng(3)
    best = make_records(32, 0.01, rng, seeds=2)
    worst = make_records(256, 0.01, rng, seeds=2)
    df = best.rename(columns={"val_avg": "val_best"}).assign(val_worst=worst["val_avg"])
    split = an.metric_split(df)
    assert set(split) == {"val_best", "val_worst"}
    assert split["val_best"]["budgets"] == split["val_worst"]["budgets"]
    assert split["val_best"]["fit"]["n_sat_ci"] is None  # no bootstrap by default
    assert split["val_best"]["fit"]["n_sat"] < 64 < split["val_worst"]["fit"]["n_sat"]


def test_q2_split_fixed_batch():
    """At fixed B, small n (many problems) wins at few steps, large n at many steps."""
    batch, rows = 1024, []
    for n, a, m_mid in ((8, 0.55, 20.0), (32, 0.65, 60.0), (128, 0.75, 200.0)):
        steps = np.unique(np.round(np.geomspace(1, 5000, 40)))
        steps = np.concatenate([[0], steps])
        with np.errstate(divide="ignore"):
            y = 0.3 + (a - 0.3) / (1 + (m_mid / steps) ** 1.5)
        rows.append(pd.DataFrame({"n": n, "b_p": batch // n, "seed": 0, "step": steps,
                                  "rollouts": steps * batch, "val_avg": y}))
    rows.append(pd.DataFrame({"n": 4, "b_p": 4, "seed": 0, "step": [0, 10], "rollouts": [0, 160],
                              "val_avg": [0.3, 0.9]}))  # another total batch, ignored
    q2 = an.q2_split(pd.concat(rows), use_record_breaking=False)
    assert list(q2.columns) == ["step", "rollouts", "n_star", "b_p_star", "reward"]
    assert q2["n_star"].iloc[0] == 8 and q2["n_star"].iloc[-1] == 128
    assert (np.diff(q2["n_star"]) >= 0).all()
    assert (q2["b_p_star"] * q2["n_star"] == batch).all()
    np.testing.assert_allclose(q2["rollouts"], q2["step"] * batch)


def test_hist_at_matched_compute_picks_closest_row():
    rows = []
    for n, b_p in ((8, 16), (128, 1)):
        for seed in (0, 1):
            for step in range(0, 33, 4):
                h = np.zeros(10)
                h[min(step // 4, 9)] = 1.0
                rows.append({"n": n, "b_p": b_p, "seed": seed, "step": step, "rollouts": n * b_p * step,
                             "val_avg": 0.5, **{f"train_hist_{i}": h[i] for i in range(10)}})
    df = pd.DataFrame(rows)
    out = an.hist_at_matched_compute(df, [8, 128], budget=128 * 10)  # closest: step 8 for both
    assert len(out) == 4 and set(out["n"]) == {8, 128}
    assert (out["step"] == 8).all() and (out["train_hist_2"] == 1.0).all()
    with pytest.raises(IsosimError):
        an.hist_at_matched_compute(df, [16], budget=1000)
    with pytest.raises(IsosimError):
        an.hist_at_matched_compute(df.drop(columns="train_hist_3"), [8], budget=1000)


def test_write_frontier_json_round_trip(results, tmp_path):
    _, res = results[(32, 0.01)]
    path = an.write_frontier_json(res, tmp_path / "out" / "frontier.json")
    back = json.loads(path.read_text())
    assert back == res
    for key in ("budgets", "n_star", "reward", "metric"):
        assert key in back
    for key in ("n_sat", "n_sat_ci", "log_c_mid", "log_c_mid_ci", "slope", "slope_ci"):
        assert key in back["fit"]
    with pytest.raises(IsosimError):
        an.write_frontier_json({"metric": "val_avg"}, tmp_path / "bad.json")


# ---- bad input --------------------------------------------------------------------------------
def test_bad_input_raises_isosim_error(results):
    df, _ = results[(256, 0.01)]
    one_bp = df[df["n"].isin([4, 8])]
    cases = [
        lambda: an.analyze(df.iloc[:0]),
        lambda: an.analyze(df, metric="val_nope", n_boot=0),
        lambda: an.analyze(df.assign(val_avg=np.nan), n_boot=0),
        lambda: an.analyze(df, budgets=[1e9], n_boot=0),
        lambda: an.frontier(df, budgets=[1.0]),
        lambda: an.frontier(df, budgets=[]),
        lambda: an.analyze(df, n_boot=-1),
        lambda: an.record_breaking(df, bin_width=0),
        lambda: an.fit_per_n(df, group=("n", "nope")),
        lambda: an.fit_n_star([1e3, 1e4], [np.nan, np.nan]),
        lambda: an.bp_sensitivity(one_bp),
        lambda: an.bp_sensitivity(df, budget=1e12),
        lambda: an.q2_split(df.iloc[:40]),
        lambda: an.metric_split(df, metrics=()),
        lambda: an.hist_at_matched_compute(df, [4], budget=1e4),
    ]
    for case in cases:
        with pytest.raises(IsosimError) as err:
            case()
        assert "\n" not in str(err.value) and str(err.value)


def test_importing_analysis_stays_light():
    code = ("import sys, isosim.frontier.analysis; "
            "heavy = [m for m in ('torch', 'transformers', 'matplotlib', 'seaborn') if m in sys.modules]; "
            "assert not heavy, heavy")
    subprocess.run([sys.executable, "-c", code], check=True)
