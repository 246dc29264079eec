"""A frontier no run could not reach: each n's sigmoid is read at most at what its runs measured, runs
that stop within one step of a budget compete at it, and the commands that read the frontier say
plainly what they cannot know (n_sat from too few n, a metric on another scale, an absurd budget)."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from isosim.frontier import analysis as an


def peak_then_decline(seeds: int = 2, noise: float = 0.003, rng_seed: int = 0) -> pd.DataFrame:
    """n = 4 rises steeply, peaks at ~.53 near 4e3 rollouts and falls to .42 at 1e5; n = 16 rises
    slowly to ~.60 at 1e5. The record-breaking points of n = 4 are its rise alone, so its sigmoid,
    left free above, reads ~.67 at 1e5: far above anything n = 4 measured."""
    rng = np.random.default_rng(rng_seed)
    rows = []
    b_p = 16
    for n in (4, 16):
        step = b_p * n
        steps = np.concatenate([[0], np.unique(np.round(np.geomspace(1, 1e5 / step, 30)).astype(int))])
        c = steps * step
        lc = np.log10(np.maximum(c, 1))
        if n == 4:
            up = 0.30 + 0.55 / (1 + np.exp(-2.5 * (lc - 3.7)))
            peak = 0.30 + 0.55 / (1 + np.exp(-2.5 * (3.6 - 3.7)))
            y = np.where(lc <= 3.6, up, peak - (peak - 0.42) * (lc - 3.6) / (5.0 - 3.6))
        else:
            y = 0.30 + 0.31 / (1 + np.exp(-3.0 * (lc - 3.9)))
        y = np.where(c == 0, 0.30, y)
        for s in range(seeds):
            v = y + rng.normal(0, noise, len(c))
            rows += [{"run_id": f"n{n}_s{s}", "n": n, "b_p": b_p, "seed": s, "step": int(st), "rollouts": float(r),
                      "val_avg": float(val)} for st, r, val in zip(steps, c, v)]
    return pd.DataFrame(rows)


from cli_helpers import one_line_error, run  # noqa: E402  (tests/cli_helpers.py)


# --------------------------------------------------------------------------------------------
# the frontier is capped by what was measured
# --------------------------------------------------------------------------------------------
def test_peak_then_decline_gives_n_star_16_from_2e4():
    df = peak_then_decline()
    res = an.analyze(df, n_boot=20)
    b, n_star = np.asarray(res["budgets"]), np.asarray(res["n_star"])
    assert (n_star[b >= 2.5e4] == 16).all() and (n_star[b <= 1e4] == 4).all()
    assert 1.2e4 < b[n_star == 16].min() < 2.5e4  # n = 16 takes over near 2e4
    # the sigmoid of n = 4 reads ~.67 at 1e5; its capped value is what it measured at best, ~.53
    sig4, cap4 = res["per_n_sigmoid"]["4"][-1], res["per_n_measured"]["4"][-1]
    assert sig4 > 0.62 and cap4 < 0.54 and res["per_n_reward"]["4"][-1] == pytest.approx(cap4)
    assert any("reads above what was measured" in w and "n = 4" in w for w in res["warnings"])


@pytest.mark.parametrize("reading", ["best", "final"])
def test_no_frontier_value_is_above_what_some_n_measured(reading):
    df = peak_then_decline(rng_seed=3)
    res = an.analyze(df, n_boot=0, reading=reading)
    measured = np.array([[np.nan if v is None else v for v in res["per_n_measured"][k]] for k in ("4", "16")])
    top = np.nanmax(measured, axis=0)
    assert (np.asarray(res["reward"]) <= top + 1e-12).all()
    if reading == "final":  # at 1e5, n = 4 ends at .42: its value on the frontier is its final one
        assert res["per_n_reward"]["4"][-1] < 0.44
    # the raw measurements, read by hand: n = 4's best evaluation over its seeds' mean
    best4 = df[df.n == 4].groupby("run_id")["val_avg"].max().mean()
    assert max(v for v in res["per_n_reward"]["4"] if v is not None) <= best4 + 1e-12


def test_a_run_stopped_one_step_short_competes_at_the_budget():
    """At 99,840 rollouts (390 steps of n = 8 at B_p 32) a run of n = 64 (2,048 a step) stops at
    98,304, 1.5 % short: it is a step short because steps are whole, and competes at 99,840."""
    rows = []
    for n in (8, 64):
        step = 32 * n
        steps = np.arange(0, 99_840 // step + 1, max(1, (99_840 // step) // 24))
        steps = np.unique(np.append(steps, 99_840 // step))
        for s in (0, 1):
            for st in steps:
                c = float(st * step)
                gain = (0.2 if n == 8 else 0.3) * c / (c + 2e4)
                rows.append({"n": n, "b_p": 32, "seed": s, "step": int(st), "rollouts": c,
                             "val_avg": 0.3 + gain + 0.001 * s})
    df = pd.DataFrame(rows)
    assert df[df.n == 64].rollouts.max() == 98_304 and df[df.n == 8].rollouts.max() == 99_840
    res = an.analyze(df, budgets=[1e4, 5e4, 99_840], n_boot=0)
    assert res["n_star"][-1] == 64 and res["per_n_reward"]["64"][-1] is not None
    assert res["per_n"]["64"]["reach_slack"] == 2048


def test_the_frontier_dataclass_is_capped_too():
    fr = an.frontier(peak_then_decline())
    i4 = fr.n_values.index(4)
    assert np.nanmax(fr.rewards[i4]) <= np.nanmax(fr.measured[i4]) + 1e-12 and fr.n_star[-1] == 16


# --------------------------------------------------------------------------------------------
# small defects: tolerance on another scale, n_sat from too few n
# --------------------------------------------------------------------------------------------
def test_a_0_100_metric_gets_a_tolerance_on_its_own_scale():
    df = peak_then_decline()
    df["val_avg"] = df["val_avg"] * 100
    res = an.analyze(df, n_boot=0)
    assert res["tol"] == pytest.approx(0.5) and res["metric_scale"] == 100
    assert any("tie tolerance is 0.005 x 100 = 0.5" in w for w in res["warnings"])
    assert an.analyze(peak_then_decline(), n_boot=0)["tol"] == an.DEFAULT_TOL  # a share keeps .005


@pytest.mark.parametrize("keep", [(16,), (4, 16)])
def test_n_sat_needs_three_distinct_n(keep):
    df = peak_then_decline()
    res = an.analyze(df[df.n.isin(keep)], n_boot=10)
    assert res["fit"]["n_sat"] is None and res["fit"]["n_sat_ci"] is None and res["fit_tol"]["n_sat"] is None
    assert any(f"only {len(keep)} distinct n" in w for w in res["warnings"])
    from isosim.frontier.wording import prediction_lines

    lines = prediction_lines({**an.frontier_summary(res), "n_values": list(keep)})
    assert lines[-1].startswith("n_sat: none (only") and "interval" not in lines[-1]


def test_frontier_png_draws_every_point_after_a_peak():
    from isosim.frontier import plots

    df = peak_then_decline()
    res = an.analyze(df, n_boot=0)
    fig = plots.frontier_figure(df, res)
    drawn = np.concatenate([c.get_offsets() for c in fig.axes[0].collections if len(c.get_offsets())])
    after_peak = df[(df.n == 4) & (df.rollouts > 2e4)]
    for x, y in zip(after_peak.rollouts, after_peak.val_avg):
        assert np.isclose(drawn, [x, y]).all(axis=1).any(), (x, y)


# --------------------------------------------------------------------------------------------
# the commands: analyze and recommend --runs agree on the peak-then-decline records
# --------------------------------------------------------------------------------------------
def test_analyze_and_recommend_runs_agree_on_peak_then_decline(tmp_path, monkeypatch, capsys):
    csv = tmp_path / "peak.csv"
    peak_then_decline().to_csv(csv, index=False)
    code, out, err = run(monkeypatch, capsys, "analyze", csv, "--n-boot", "10", "--out", tmp_path / "a")
    assert code == 0, err
    res = json.loads((tmp_path / "a" / "frontier.json").read_text())
    b, n_star = np.asarray(res["budgets"]), np.asarray(res["n_star"])
    assert (n_star[b >= 2.5e4] == 16).all()
    code, out, err = run(monkeypatch, capsys, "recommend", "--runs", csv, "--budget", "2e5")
    assert code == 0, err
    assert "pick n = 16" in out and "tie band: n in {16}" in out and "[" not in out.split("tie band")[1].splitlines()[0]
    assert "leaves out the error of carrying the cheap curves to C" in out
    assert "does n matter at C = 2e+05? yes" in out and "Regime: n* rising with budget" in out
    code, out, err = run(monkeypatch, capsys, "recommend", "--runs", csv, "--budget", "2e5", "--json")
    r = json.loads(out)
    assert all(v["expected_regret"] >= 0 for v in r["n"].values()) and r["n_matters"]["worst_n"] == 4


def test_a_negative_regret_is_clipped_and_said(tmp_path, monkeypatch):
    from isosim.predict import choice, stepcurve

    csv = tmp_path / "peak.csv"
    peak_then_decline().to_csv(csv, index=False)
    real = stepcurve.predict

    def with_a_negative(*a, **kw):
        out = real(*a, **kw)
        out["n"]["4"]["expected_regret"] = -0.01
        return out

    monkeypatch.setattr(stepcurve, "predict", with_a_negative)
    r = choice.recommend_runs(csv, 2e5)
    assert r["n"]["4"]["expected_regret"] == 0.0 and r["n"]["4"]["clipped"]
    assert r["n"]["4"]["expected_regret_raw"] == -0.01 and "clipped at 0" in r["note"]


@pytest.mark.parametrize("flag", [["--preset", "hard"], ["--train-size", "300"], ["--max-batch", "100"]])
def test_recommend_runs_refuses_flags_it_would_ignore(tmp_path, monkeypatch, capsys, flag):
    csv = tmp_path / "peak.csv"
    peak_then_decline().to_csv(csv, index=False)
    code, out, err = run(monkeypatch, capsys, "recommend", "--runs", csv, "--budget", "2e5", *flag)
    one_line_error(code, err, flag[0], "would be ignored")


def test_an_absurd_budget_is_refused_plainly(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("ISOSIM_CACHE", str(tmp_path))
    code, out, err = run(monkeypatch, capsys, "recommend", "--budget", "1e30")
    one_line_error(code, err, "beyond any plausible run")


def test_a_small_max_batch_works_or_fails_in_user_words(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("ISOSIM_CACHE", str(tmp_path))
    code, out, err = run(monkeypatch, capsys, "recommend", "--budget", "2e4", "--max-batch", "100", "--json")
    assert code == 0, err
    r = json.loads(out)
    assert r["b_p"] * r["n"] <= 100 and 8 in r["grid"]["b_p_values"] and r["grid"]["n_floor"] == 2
    assert all(n * b <= 100 for n, b in r["grid"]["cells"])
    code, out, err = run(monkeypatch, capsys, "recommend", "--budget", "2e4", "--max-batch", "10")
    one_line_error(code, err, "below the smallest step recommend simulates", "--max-batch")
