"""The two readings, the step readers, recommend --runs, and the plane recomputed from the records."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from isosim.errors import IsosimError
from isosim.predict import stepcurve
from isosim.validation import plane as pl
from isosim.validation import readings as rd

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "studies" / "results"


def test_readings_differ_on_a_peaked_run():
    curve = [(0, 0.1), (100, 0.5), (1000, 0.7), (10000, 0.4)]
    assert rd.value_at(curve, 10000, "final") == pytest.approx(0.4)
    assert rd.value_at(curve, 10000, "best") == pytest.approx(0.7)
    # between evaluations: best is the larger of the interpolated value and every earlier one
    assert rd.value_at(curve, 500, "best") == pytest.approx(rd.value_at(curve, 500, "final"))
    assert math.isnan(rd.value_at(curve, 20000, "best"))  # ends short of the budget
    with pytest.raises(IsosimError):
        rd.value_at(curve, 100, "last")


def test_truth_and_regret_per_reading():
    runs = {2: {0: [(0, 0.1), (100, 0.8), (1000, 0.5)], 1: [(0, 0.1), (100, 0.78), (1000, 0.52)]},
            8: {0: [(0, 0.1), (100, 0.4), (1000, 0.6)], 1: [(0, 0.1), (100, 0.42), (1000, 0.62)]}}
    best, final = rd.truth_at(runs, 1000, "best"), rd.truth_at(runs, 1000, "final")
    assert best["best"] == 2 and final["best"] == 8
    r = rd.regret(final, 2)
    assert r["reading"] == "final" and r["regret"] == pytest.approx(0.1) and not r["within_2se"]
    assert rd.regret(best, 2)["regret"] == 0.0


def test_steps_reader_reads_larger_n_from_smaller_n_at_matched_steps():
    # every n follows the same curve in update steps; n = 2 has taken 100 steps in the cheap part
    def curve(n, top_rollouts):
        pts = [(0, 0.1)]
        s = 1
        while s * 16 * n <= top_rollouts:
            pts.append((s * 16 * n, 0.1 + 0.5 * (1 - math.exp(-s / 30))))
            s *= 2
        return pts
    cheap = {n: curve(n, 3200) for n in (2, 8, 32)}
    v = stepcurve.read_forward(cheap, 16, 16 * 32 * 64, "steps", "final")  # n = 32 takes 64 steps at C
    # n = 32's 64 steps at C: read from n = 2's curve at 64 steps (not observed by n = 32 itself)
    assert v[32] == pytest.approx(0.1 + 0.5 * (1 - math.exp(-64 / 30)), abs=1e-9)
    assert stepcurve.read_forward(cheap, 16, 16 * 32 * 64, "level")[2] > stepcurve.read_forward(cheap, 16, 16 * 32 * 64, "level")[32]
    out = stepcurve.predict({0: cheap, 1: cheap}, 16, 16 * 32 * 64, "steps", "best", eval_samples=2400)
    assert out["pick"] in out["tie_band"] and out["reading"] == "best"
    assert all(out["n"][str(n)]["expected_regret_se"] > 0 for n in (2, 8, 32))


def test_plane_recomputed_from_the_records_matches_the_committed_numbers():
    """A reduced but exact recomputation: one sweep, every method, compared number by number."""
    committed = json.loads((RESULTS / "plane.json").read_text())
    name = "organism_f8/hard-128"
    doc = pl.build(RESULTS, readers=tuple(committed["readers"]), only=(name,))
    want, got = committed["sweeps"][name]["summary"], doc["sweeps"][name]["summary"]
    assert sorted(got) == sorted(want)
    assert "adaptive (sbi)" in want  # the reader inside the search, replayed rung by rung
    for method, w in want.items():
        g = got[method]
        assert g["replays"] == w["replays"] == 14
        assert g["mean_overhead"] == pytest.approx(w["mean_overhead"], abs=1e-12), method
        for reading in ("best", "final"):
            assert g[reading]["mean_regret"] == pytest.approx(w[reading]["mean_regret"], abs=1e-12), (method, reading)
            assert g[reading]["within_2se"] == w[reading]["within_2se"], (method, reading)
    # the overall block is the mean over the six sweeps' replays (84), both readings named
    assert committed["overall"]["cheap leader @0.05"]["replays"] == 84
    assert set(committed["readings"]) == {"best", "final"} and committed["headline"] == "best"


METHOD_FILES = ("isosim/predict/sbi.py", "isosim/predict/stepcurve.py", "isosim/predict/from_runs.py",
                "studies/results/sbi_bank.json")


def test_frozen_method_is_the_committed_code():
    """The frozen method's files are in git as named, and the method's own files are unchanged since
    (it is scored prospectively: a change to it needs a new freeze and a new plane_method.json)."""
    frozen = json.loads((RESULTS / "plane_method.json").read_text())
    assert frozen["reading"] == "best" and frozen["method_label"] in json.loads((RESULTS / "plane.json").read_text())["overall"]
    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    for path, blob in frozen["code"].items():
        assert subprocess.run(["git", "cat-file", "-e", blob], cwd=ROOT).returncode == 0, f"{path}: blob {blob} not in git"
    for path in METHOD_FILES:
        now = subprocess.run(["git", "hash-object", path], capture_output=True, text=True, check=True, cwd=ROOT).stdout.strip()
        assert now == frozen["code"][path], f"{path} changed since the method was frozen"


def _cli(*args):
    return subprocess.run([sys.executable, "-c", "import cli; cli.main()", *map(str, args)], capture_output=True,
                          text=True, cwd=ROOT)


def test_recommend_runs_json_and_errors(tmp_path):
    src = RESULTS / "organism_f8" / "hard-512"
    for run in sorted(src.glob("n*_bp16_s*")):
        (tmp_path / run.name).mkdir()
        rows = [line for line in (run / "records.jsonl").read_text().splitlines() if json.loads(line)["rollouts"] <= 1e4]
        (tmp_path / run.name / "records.jsonl").write_text("\n".join(rows) + "\n")
    res = _cli("recommend", "--runs", tmp_path, "--budget", "2e5", "--json")
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    assert out["reading"] == "best" and out["pick"] in out["tie_band"] and out["method"] == "level"
    assert set(out["n"]) == {"2", "4", "8", "16", "32", "64", "128"}
    assert out["n"][str(out["pick"])]["expected_regret"] == 0.0
    bad = _cli("recommend", "--runs", tmp_path, "--budget", "5e3")
    assert bad.returncode == 2 and "past the budget" in bad.stderr and "Traceback" not in bad.stderr
    bad = _cli("recommend", "--runs", tmp_path, "--budget", "2e5", "--reading", "last")
    assert bad.returncode == 2 and "reading must be" in bad.stderr


def test_scoreboard_values_in_both_readings():
    import numpy as np
    import pandas as pd

    from isosim.validation import scoreboard as sb

    df = pd.DataFrame({"n": 2, "b_p": 16, "seed": 0, "rollouts": [0, 32, 320, 3200], "val_avg": [0.1, 0.5, 0.7, 0.4]})
    budgets = np.array([320.0, 3200.0])
    final, best = sb.values_at(df, budgets)[2][0], sb.values_at(df, budgets, reading="best")[2][0]
    assert final == pytest.approx([0.7, 0.4]) and best == pytest.approx([0.7, 0.7])
    doc = json.loads((RESULTS / "scoreboard.json").read_text())
    assert "final" in doc["reading"] and set(doc["summary_best"]) == set(doc["summary"])


@pytest.mark.parametrize("key", sorted(pl.LONG_SWEEPS))
def test_long_predictions_follow_from_the_cheap_parts(tmp_path, key):
    """The picks committed before the long sweeps passed 1e5 rollouts (plane_predictions_long.json)
    are what ``recommend`` gives on the committed records at or below 1e5 alone."""
    committed = json.loads((RESULTS / "plane_predictions_long.json").read_text())["sweeps"][key]
    src = RESULTS / pl.LONG / pl.LONG_SWEEPS[key]
    for run in sorted(src.glob("n*_bp16_s*")):
        (tmp_path / run.name).mkdir()
        rows = [line for line in (run / "records.jsonl").read_text().splitlines() if json.loads(line)["rollouts"] <= 1e5]
        (tmp_path / run.name / "records.jsonl").write_text("\n".join(rows) + "\n")
    for label, method in (("frozen (sbi-band)", "sbi-band"), ("cheap leader (level)", None)):
        res = _cli("recommend", "--runs", tmp_path, "--budget", "2e6", "--reading", "best", "--json",
                   *(("--method", method) if method else ()))
        assert res.returncode == 0, res.stderr
        got, want = json.loads(res.stdout), committed[label]
        assert got["pick"] == want["pick"] and got["tie_band"] == want["tie_band"], label
        assert got["cheap_rollouts"] == want["cheap_rollouts"] and got["method"] == want["method"]
        for n, v in want["n"].items():
            assert got["n"][n]["expected_regret"] == pytest.approx(v["expected_regret"], abs=1e-12), (label, n)
