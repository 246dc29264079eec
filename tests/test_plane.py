"""The two readings, the step readers, recommend --runs, and the plane recomputed from the records."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from isosim.errors import IsosimError
from isosim.files import dumps_json
from isosim.predict import stepcurve
from isosim.validation import plane as pl
from isosim.validation import plane_methods as pm
from isosim.validation import plane_report as rep
from isosim.validation import readings as rd

from json_helpers import assert_same_json  # tests/json_helpers.py

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


def _same(want, got, path="plane.json"):
    """Every key and value equal (floats to 1e-9)."""
    assert_same_json(want, got, path, abs=1e-9)


@pytest.fixture(scope="module")
def committed():
    return json.loads((RESULTS / "plane.json").read_text())


@pytest.fixture(scope="module")
def recomputed(committed):
    """plane.json rebuilt from the committed records (the six 2e5 sweeps and the three long ones),
    the cheap-part readers' picks taken from its ``picks`` block instead of refitting every curve
    (those picks are recomputed below); about 20-40 s on one core."""
    return json.loads(dumps_json(rep.document(RESULTS, stored=committed["picks"])))


@pytest.mark.parametrize("block", ["sweeps", "overall", "held_out", "all_sweeps", "hindsight", "constants", "registered", "loso",
                                   "isosim_method", "dominance", "held_out_dominance", "held_out_covers",
                                   "prospective", "picks", "readings", "shares", "readers", "min_budget", "simfit",
                                   "not_scored_yet", "second_learner", "constant_lr", "constant_lr_at_8"])
def test_every_block_of_the_plane_is_recomputed_from_the_records(committed, recomputed, block):
    _same(committed[block], recomputed[block], block)


def test_nothing_in_the_plane_goes_unchecked(committed, recomputed):
    assert sorted(committed) == sorted(recomputed)
    _same(committed, recomputed)


def _reader_rows(name):
    doc = pl.build(RESULTS, readers=rep.READERS, only=(name,), methods={})
    return doc["picks"][name]


def test_reader_picks_refitted_on_hard_128(committed):
    """The stored picks are what the readers give: refitted on one sweep here (every sweep: the slow test)."""
    _same(committed["picks"]["organism_f8/hard-128"], _reader_rows("organism_f8/hard-128"))


@pytest.mark.slow
@pytest.mark.parametrize("name", ["organism/real/easy", "organism/real/hard", "organism_f8/hard-1238-t06",
                                  "organism_f8/hard-256", "organism_f8/hard-512", "organism_long/hard-128-long",
                                  "organism_long/hard-512-long", "organism_long/hard-1238-long", "organism_hard/hard-128",
                                  "organism_hard_const/hard-128"])
def test_reader_picks_refitted_on_every_sweep(committed, name):
    _same(committed["picks"][name], _reader_rows(name))


def test_the_constants_are_on_the_plane(committed):
    o, sweeps = committed["overall"], committed["sweeps"]
    six = [k for k, v in sweeps.items() if not v["held_out"] and not pl.apart(k)]
    replays = o["cheap leader @0.05"]["replays"]
    assert replays == 84
    # n = 2 is not in the real sweeps' grids (4..128): not scored there, not invented
    assert committed["constants"]["fixed n = 2"]["not_in_grid"] == ["organism/real/easy", "organism/real/hard"]
    assert "fixed n = 2" not in sweeps["organism/real/easy"]["summary"]
    assert o["fixed n = 2"]["replays"] == sum(sweeps[k]["summary"].get("fixed n = 2", {}).get("replays", 0) for k in six) < replays
    for n in (4, 8, 16):
        assert o[f"fixed n = {n}"]["replays"] == replays and o[f"fixed n = {n}"]["mean_overhead"] == 0.0
        assert f"fixed n = {n}" in committed["held_out"] or n not in (2, 8, 32, 128)
    # the paper's n: easy 512 and hard 128, each the grid's 128 here
    assert {k: (v["paper_n"]["paper"], v["paper_n"]["scored_as"]) for k, v in sweeps.items()}["organism/real/easy"] == (512, 128)
    assert all(v["paper_n"]["scored_as"] == 128 for v in sweeps.values())
    # the hindsight line is not a method, and no constant does better than it
    for block, summary in (("overall", o), ("held_out", committed["held_out"]), ("all_sweeps", committed["all_sweeps"])):
        for reading in ("best", "final"):
            h = committed["hindsight"][block][reading]
            assert f"fixed n = {h['n']}" not in summary or summary[f"fixed n = {h['n']}"][reading]["mean_regret"] == \
                pytest.approx(h["mean_regret"])
            assert all(v[reading]["mean_regret"] >= h["mean_regret"] - 1e-12 for m, v in summary.items()
                       if m.startswith("fixed n = ") and v["replays"] == h["replays"])


def test_every_isosim_method_is_scored_leave_one_sweep_out(committed):
    loso = committed["loso"]
    for name, c in loso["reader_choice"].items():
        twin = pm.TWINS.get(name) or {v: k for k, v in pm.TWINS.items()}.get(name)
        assert name not in c["trained_on"] and twin not in c["trained_on"] and c["trained_on"]
        assert c["reader"].split(" @")[0] in rep.ISOSIM_READERS
    assert all(v["same"] for v in loso["isosim_predict_choice"].values()), loso["isosim_predict_choice"]
    # the LOSO reader's rows on a sweep are the chosen reader's rows there
    for name, c in loso["reader_choice"].items():
        got, want = committed["sweeps"][name]["summary"][rep.LOSO_READER], committed["sweeps"][name]["summary"][c["reader"]]
        assert got == want
    # the simulated bank holds no measured record: its settings are drawn, its curves are its own
    bank = json.loads((RESULTS / "sbi_bank.json").read_text())
    assert {d["params"]["profile"] for d in bank} <= {"profile_t06.json", "hard", "easy"}
    assert all(set(d["params"]) == {"n_train", "profile", "lr", "skill", "memorize", "typicality", "n_val"} for d in bank)
    measured = set()
    for rec in RESULTS.glob("organism*/**/n*_bp*_s*/records.jsonl"):
        vals = [json.loads(line).get("val_avg") for line in rec.read_text().splitlines()[1:4]]
        measured.add(tuple(round(v, 5) for v in vals if v is not None))
    assert not any(tuple(v for _, v in c[1:4]) in measured for d in bank for c in d["curves"].values())


def test_a_registered_method_sees_only_its_cheap_runs():
    """The extension point: a method reads its declared runs up to share x C, its fit gets the other
    sweeps only; its pick is scored in both readings with its overhead."""
    seen, trained = [], []

    def pick(a):
        for curves in a.runs.values():
            for n, c in curves.items():
                pos = [r for r, _ in c if r > 0]
                assert n in (8, 32) and (len(pos) == 1 or pos[-1] <= a.budget * 0.025 * 1.01)
        seen.append(a)
        last = {n: c[-1][1] for n, c in a.runs[a.seed].items()}
        return {"best": max(last, key=last.get), "final": 8}

    toy = pm.Method("toy @0.025", pick, runs=(8, 32), share=0.025, fit=lambda other: trained.append(sorted(other)))
    name = "organism_f8/hard-128"
    doc = pl.build(RESULTS, readers=(), only=(name,), methods={"toy @0.025": toy, "fixed n = 8": pm.constant(8)})
    rows = [r for r in doc["rows"] if r["method"] == "toy @0.025"]
    assert len(rows) == len(seen) == 14 and all(r["final"]["chosen"] == 8 for r in rows)
    assert trained and name not in trained[0] and "organism_long/hard-128-long" not in trained[0]
    assert "organism_f8/hard-512" in trained[0]
    for r, a in zip(rows, seen):
        other = 32 if r["chosen"] == 8 else 8
        assert r["overhead"] == pytest.approx(a.runs[a.seed][other][-1][0] / r["budget"])
    const = [r for r in doc["rows"] if r["method"] == "fixed n = 8"]
    assert len(const) == 14 and all(r["overhead"] == 0 and r["chosen"] == 8 for r in const)
    with pytest.raises(IsosimError):
        pm.register(pm.constant(8))  # the name is taken


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
        for n, v in want["n"].items():  # the reader's own value: recommend shows a negative one clipped at 0
            g = got["n"][n]
            assert g.get("expected_regret_raw", g["expected_regret"]) == pytest.approx(v["expected_regret"], abs=1e-12), (label, n)
            assert g["expected_regret"] == max(0.0, v["expected_regret"]) or g["expected_regret"] == pytest.approx(v["expected_regret"], abs=1e-12)


def test_simfit_calibrations_on_the_plane_are_the_studys(committed):
    """Every simfit calibration the study scored is on the plane, declared as the study declares it
    (studies/scoring/simfit.py), and scores what the study's rows score on all nine sweeps: the plane's
    replays, leave-one-sweep-out prior and tie band are the study's leave-one-setting-out ones."""
    import importlib.util

    from isosim.predict import lr_read as lrr

    spec = importlib.util.spec_from_file_location("simfit_study", ROOT / "studies" / "scoring" / "simfit.py")
    study = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(study)
    assert study.FROZEN == lrr.FROZEN and study.WIDE_LR == pm.WIDE_LR and study.PRIOR_FLOOR == pm.PRIOR_FLOOR
    assert sorted(study.METHODS) == sorted(pm.CALIBRATIONS)
    for label, m in study.METHODS.items():
        c = pm.CALIBRATIONS[label]
        assert (m["cheap"], tuple(m["free"]), m["model"], bool(m.get("wide")), bool(m.get("stay"))) == \
            (c["cheap"], tuple(c["free"]), c["model"], c["wide"], c["stay"]), label
        assert committed["registered"][label]["fitted_on_other_sweeps"] and committed["registered"][label]["kind"] == "simfit"
    scores = json.loads((RESULTS / f"simfit_{lrr.VARIANT}.json").read_text())["overall"]
    plane = committed["all_sweeps"]
    for label in pm.CALIBRATIONS:
        assert plane[label]["replays"] == scores[label]["replays"] in (92, 120)  # 92: n = 2 not in the real sweeps
        assert plane[label]["mean_overhead"] == pytest.approx(scores[label]["mean_overhead"], abs=1e-12)
        for reading in ("best", "final"):
            assert plane[label][reading]["mean_regret"] == pytest.approx(scores[label][reading]["mean_regret"], abs=1e-12)


def test_simfit_bar_is_read_from_the_summaries(committed):
    """The bar block says what the summaries say: the frozen calibration against a fixed n = 8 and
    the cheap leader at 5 %, in each block and reading."""
    from plane_helpers import assert_simfit_bar_follows

    assert_simfit_bar_follows(committed)
    bar = committed["simfit"]
    nine = bar["blocks"]["all_sweeps"][bar["frozen"]]
    assert nine["overhead"] <= 0.05 and 0 < nine["not_8"]["best"] < 120
