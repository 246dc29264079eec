"""The long-sweep table (isosim.validation.crossing): n* with tie bands, crossings, the cheap leader."""

import math

import numpy as np
import pytest

from isosim.validation import crossing as cr

BUDGETS = np.geomspace(1e3, 1e6, 40)


def _curve(fn, jitter=0.0):
    return [(float(b), float(fn(b) + jitter)) for b in BUDGETS]


def _sweep():
    # small n: fast, plateaus at .5; large n: slow, passes .5 at 1e5 and reaches .7;
    # middle n: peaks at .55 at 3e4 then falls (what the best reading keeps and the final does not)
    small = lambda b: 0.5 * (1 - math.exp(-b / 5e3))  # noqa: E731
    large = lambda b: 0.7 * math.log(b / 1e3) / math.log(1e3)  # noqa: E731
    middle = lambda b: 0.55 - 0.1 * abs(math.log10(b / 3e4))  # noqa: E731
    return {2: {0: _curve(small, 0.005), 1: _curve(small, -0.005)},
            8: {0: _curve(middle, 0.005), 1: _curve(middle, -0.005)},
            128: {0: _curve(large, 0.005), 1: _curve(large, -0.005)}}


def test_crossing_and_table_in_both_readings():
    runs = _sweep()
    both = cr.measure_both(runs, [1e4, 1e5, 1e6])
    assert list(both) == ["best", "final"]
    for reading, m in both.items():
        assert [t["n_star"] for t in m["n_star"]][-1] == 128
        assert m["n_star"][-1]["tie_band"] == [128]
        assert m["n_star"][-1]["seed_se"] == pytest.approx(0.005 * math.sqrt(2) / math.sqrt(2))
        # large overtakes small where .7 log(b/1e3)/log(1e3) passes .5(1 - e^(-b/5e3)): ~1.4e5
        assert 1.2e5 < m["overtakes"]["2<128"] < 1.7e5
        assert m["n_star_path"][-1]["n_star"] == 128
        # within 2 se (.01) of the best a little before it leads
        assert 0.8e5 < m["in_tie_band_from"] <= m["crossing"]
    # the middle n's peak: the best reading keeps .55 (ahead of small n from 1e4 on), the final
    # reading sees it fall behind small n after its peak
    assert both["best"]["overtakes"]["2<8"] is not None and both["final"]["overtakes"]["2<8"] is None
    assert both["final"]["crossing"] == pytest.approx(both["final"]["overtakes"]["2<128"])
    assert both["best"]["crossing"] >= both["best"]["overtakes"]["2<128"]


def test_cheap_leader_loses_where_large_n_overtakes_late():
    m = cr.measure(_sweep(), [1e5, 1e6], "best", share=0.05)  # cheap part 5e4: the middle n leads there
    lead = m["cheap_leader"]
    assert [x["pick"] for x in lead["per_seed"]] == [8, 8]
    assert lead["mean_regret"] == pytest.approx(0.7 - 0.55, abs=0.01)
    assert lead["mean_regret_in_se"] > 2 and not any(x["within_2se"] for x in lead["per_seed"])


def test_no_crossing_when_small_n_leads_throughout():
    runs = {2: {0: _curve(lambda b: 0.6, 0.01), 1: _curve(lambda b: 0.6, -0.01)},
            32: {0: _curve(lambda b: 0.4, 0.01), 1: _curve(lambda b: 0.4, -0.01)}}
    m = cr.measure(runs, [1e5, 1e6], "final")
    assert m["crossing"] is None and m["overtakes"]["2<32"] is None
    assert m["cheap_leader"]["mean_regret"] == 0.0


def test_overtake_budget():
    b = [1.0, 2.0, 3.0, 4.0]
    assert cr.overtake_budget(np.array([1, 1, 1, 1.0]), np.array([0, 2, 0, 2.0]), b) == 4.0
    assert cr.overtake_budget(np.array([1, 1, 1, 1.0]), np.array([2, 2, 2, 2.0]), b) == 1.0
    assert cr.overtake_budget(np.array([1, 1, 1, 1.0]), np.array([2, 2, 2, 0.0]), b) is None


def _measure(*args):
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    return subprocess.run([sys.executable, "-m", "llm_runs.organism.f8", "measure", *args], cwd=root, capture_output=True,
                          text=True, env={**os.environ, "OMP_NUM_THREADS": "1"})


def test_measure_readings_refuses_bad_budgets_and_unfinished_runs(tmp_path):
    long = "studies/results/organism_long"
    src = f"hard-128-long={long}/hard-128-long"
    for bad, msg in (("2e5,abc", "separated by commas"), ("2e5,1e5", "positive and increasing")):
        res = _measure("--runs", src, "--prediction", f"{long}/prediction.json", "--readings", bad, "--out", str(tmp_path / "m.json"))
        assert res.returncode == 2 and msg in res.stderr and "Traceback" not in res.stderr
    # a sweep whose runs end before the last budget: one line, nothing written
    res = _measure("--runs", src, "--prediction", f"{long}/prediction.json", "--readings", "2e5,4e6", "--out", str(tmp_path / "m.json"))
    assert res.returncode == 2 and "8 run(s) end short of 4e+06" in res.stderr and "Traceback" not in res.stderr
    assert not (tmp_path / "m.json").exists()


def test_plateaus_peaks_and_matched_steps():
    runs = _sweep()
    p = cr.plateaus(runs, b_p=4, steps=(10, 100, 1000, 10**6))
    per = p["per_n"]
    # the large n climbs to .7 at the last budget; the middle n peaks at .55 at 3e4 and falls to .4
    assert per["128"]["peak"] == pytest.approx(0.7, abs=1e-9) and per["128"]["peak_rollouts"] == [1e6, 1e6]
    assert per["8"]["peak"] == pytest.approx(0.55, abs=0.01) and per["8"]["last"] == pytest.approx(0.4, abs=0.01)
    assert all(2e4 < r < 4.5e4 for r in per["8"]["peak_rollouts"])
    assert per["8"]["peak_steps"] == [r / (8 * 4) for r in per["8"]["peak_rollouts"]]
    assert per["2"]["steps_at_top"] == 1e6 / 8
    assert p["peak_seed_se"] == pytest.approx(0.005) and p["peaks_within_2se"] == [128]
    assert p["peak_spread"] == pytest.approx(0.7 - 0.5, abs=0.01)
    # matched steps stop where the shortest run (n 128: 1e6 / 512 steps) ends; at 100 steps n 2 has
    # seen 800 rollouts (before its first record: its first value), n 128 51,200
    assert [m["steps"] for m in p["matched_steps"]] == [10, 100, 1000]
    m100 = p["matched_steps"][1]
    assert m100["mean"]["128"] == pytest.approx(0.7 * math.log(51.2) / math.log(1e3), abs=1e-6)
    assert m100["mean"]["2"] == pytest.approx(0.5 * (1 - math.exp(-1e3 / 5e3)), abs=1e-6)
    # the middle n at 3,200 rollouts: .55 - .1 |log10(3200 / 3e4)| = .453, ahead of the large n's .399
    assert m100["mean"]["8"] == pytest.approx(0.55 - 0.1 * abs(math.log10(3200 / 3e4)), abs=1e-6)
    assert m100["best"] == 8 and m100["tie_band"] == [8]


def test_plateaus_count_each_runs_last_record():
    """Runs to one budget stop at whole steps, apart by up to a step: a run whose peak is its last
    record, past where another run stopped, still peaks there (hard-1238 n = 32 seed 0: .6854 at
    its last evaluation, 2e6, not its 2.7e5 value)."""
    b_p = 16
    ends = {2: 2_000_000.0, 32: 1_999_872.0, 128: 1_998_848.0}  # whole steps of n * 16 rollouts
    rising = {32: 0.6854}  # n = 32 seed 0 climbs to its last record

    def curve(n, seed):
        pts = [(0.0, 0.3), (2.7e5, 0.66 + 0.002 * seed), (1e6, 0.64)]
        return [*pts, (ends[n], rising.get(n, 0.62) if seed == 0 else 0.62)]

    runs = {n: {s: curve(n, s) for s in (0, 1)} for n in ends}
    p = cr.plateaus(runs, b_p=b_p, steps=(25,))
    assert p["per_n"]["32"]["peak_rollouts"] == [1_999_872.0, 2.7e5]
    assert p["per_n"]["32"]["peak"] == pytest.approx((0.6854 + 0.662) / 2)
    assert p["per_n"]["2"]["peak_rollouts"] == [2.7e5, 2.7e5]
    assert p["per_n"]["32"]["last"] == pytest.approx((0.6854 + 0.62) / 2)
    assert p["per_n"]["128"]["steps_at_top"] == 1_998_848.0 / (128 * b_p) == 976
    assert p["top_budget"] == 2_000_000.0
