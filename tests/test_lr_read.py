"""The simfit model read at each run's lr (isosim.predict.lr_read), in every form of recommend --runs,
and plan's --lr-tuned-at written and read back."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import yaml
from cli_helpers import run

from isosim.predict import lr_read as lrr
from isosim.predict import partial
from isosim.predict import simfit_frozen as sff
from isosim.predict import simfit_lr as slr
from isosim.validation import adaptive as ad

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "studies" / "results"
CONST = RESULTS / "organism_hard_const" / "hard-128"


def frozen_prior():
    doc = sff.frozen()
    return ({p: tuple(v) for p, v in doc["prior_for_a_new_learner"]["prior"].items()},
            float(doc["settings"]["tie_band_value"]))


def test_rho_is_the_runs_lr_over_the_calibrations_from_where_it_was_set():
    at8 = lrr.Anchor(1.0606601717798212e-4, 128)
    # one lr for every n, set where the sqrt rule puts n = 8: n = 8 is at the calibration, n = 2 at twice it
    assert lrr.rho(1.0606601717798212e-4, 8, 16, at8) == pytest.approx(1.0, rel=1e-12)
    assert lrr.rho(1.0606601717798212e-4, 2, 16, at8) == pytest.approx(2.0, rel=1e-12)
    assert lrr.rho(1.0606601717798212e-4, 128, 16, at8) == pytest.approx(0.25, rel=1e-12)
    # the same lr read from a reference of 1024 (what 07a27e7 assumed) puts n = 64 at the calibration
    assert lrr.rho(3e-4, 64, 16, lrr.Anchor(3e-4, 1024)) == pytest.approx(1.0, rel=1e-12)
    # the sqrt rule from any anchor is the calibration for every n
    lrs = {n: 2e-6 * math.sqrt(16 * n / 256) for n in (2, 8, 64, 256)}
    assert lrr.at_calibration(lrr.rhos(lrs, 16, lrr.Anchor(2e-6, 256)))
    assert not lrr.at_calibration(lrr.rhos({n: 2e-6 for n in lrs}, 16, lrr.Anchor(2e-6, 256)))
    for bad in (0.0, -1e-6, float("nan")):
        with pytest.raises(Exception, match="lr"):
            lrr.rho(bad, 8, 16, at8)
    with pytest.raises(Exception, match="batch"):
        lrr.Anchor(1e-6, 0)


@pytest.mark.cpu_sensitive
def test_with_no_measured_decay_and_the_anchor_at_1024_it_is_the_07a27e7_method():
    """On the committed constant-lr sweep (every n at 3e-4, config base_lr at lr_ref_batch 1024), the
    model with the a-priori calibration (a = 1, decay prior (0, 1)) gives 07a27e7's picks and gains."""
    bank = sff.bank_of("organism_hard_const/hard-128")
    prior, band = frozen_prior()
    sw = ad.load_sweep(CONST)
    cfg = json.loads((CONST / "n8_bp16_s0" / "config.json").read_text())
    anchor = lrr.Anchor(cfg["base_lr"], cfg["lr_ref_batch"])
    committed = json.loads((RESULTS / "organism_hard_const" / "prediction_simfit_lr.json").read_text())
    committed = committed["organism-hard-128-const"]["picks"]
    for i, budget in enumerate((1e5, 3e5, 1e6)):
        grid = ad.grid_at(sorted(sw["runs"]), budget, sw["b_p"])
        lrs = {n: 3e-4 for n in grid}
        for seed in sw["seeds"]:
            runs = {8: {seed: ad.reveal(sw["runs"][8][seed], 0.05 * budget)}}
            pts = [(8, r, v) for r, v in runs[8][seed]]
            old = slr.choose(bank, pts, grid, budget, prior, ("log_lr", "log_h"), band, (8,), "constant")
            new = lrr.read_runs(bank, runs, grid, budget, lrs, anchor, prior, band, lrr.LrCalibration(), every=False)
            for reading in ("best", "final"):
                assert new[reading]["pick"] == old[reading]["pick"] == committed[reading][f"seed {seed}"][i]
                for n, v in old[reading]["predicted_gain"].items():
                    assert new[reading]["predicted_gain"][n] == pytest.approx(v, abs=1e-9)


def _sqrt_sweep():
    return RESULTS / "organism_hard" / "hard-128"


@pytest.mark.cpu_sensitive
def test_every_n_at_the_calibration_reads_the_one_n_the_frozen_method_was_scored_on():
    bank = sff.bank_of("organism_hard/hard-128")
    prior, band = frozen_prior()
    sw = ad.load_sweep(_sqrt_sweep())
    budget = 3e5
    grid = ad.grid_at(sorted(sw["runs"]), budget, sw["b_p"])
    lrs = {n: 3e-4 * math.sqrt(16 * n / 1024) for n in grid}
    every = {n: {0: ad.reveal(sw["runs"][n][0], 0.05 * budget)} for n in grid}
    got = lrr.read_runs(bank, every, grid, budget, lrs, lrr.Anchor(3e-4, 1024), prior, band, lrr.learner_calibration(),
                        every=True)
    pts = [(8, r, v) for r, v in every[8][0]]
    frozen = sff.choose(bank, pts, grid, budget, prior, ("log_lr", "log_h"), band, stay=(8,))
    assert got["form"] == "every n" and got["read_as"] == "one n" and got["at_calibration"]
    for reading in ("best", "final"):
        assert got[reading]["pick"] == frozen[reading]["pick"]


def test_over_stepping_costs_value_only_above_the_calibration():
    bank = sff.bank_of("organism_hard/hard-128")
    theta = {"log_lr": 2.8, "power": 0.0, "log_h": 0.2, "decay": 0.5}
    cal = lrr.LrCalibration(a=1.0, decay=0.5, decay_sd=0.2)
    r = np.array([1e5, 5e5, 1e6])
    no_decay = lrr.predict_at(bank, {**theta, "decay": 0.0}, 2, r, 0.1, 2.0, cal)
    decayed = lrr.predict_at(bank, theta, 2, r, 0.1, 2.0, cal)
    np.testing.assert_allclose(decayed, no_decay * np.exp(-0.5 * r / 1e6 * 3.0))
    under = lrr.predict_at(bank, theta, 128, r, 0.1, 0.25, cal)
    np.testing.assert_allclose(under, lrr.predict_at(bank, {**theta, "decay": 0.0}, 128, r, 0.1, 0.25, cal))


def test_the_learner_calibration_is_the_lr_grids_or_the_a_priori_one(tmp_path):
    assert lrr.learner_calibration(tmp_path / "none.json") == lrr.LrCalibration()
    cal = lrr.learner_calibration()
    if lrr.LR_CALIBRATION_FILE.is_file():
        doc = json.loads(lrr.LR_CALIBRATION_FILE.read_text())["calibration"]
        assert (cal.a, cal.decay, cal.decay_sd) == (doc["a"], doc["decay"], doc["decay_sd"])
        assert cal.decay_sd >= 0.5 * cal.decay


def _plan(monkeypatch, capsys, tmp_path, *extra):
    code, out, err = run(monkeypatch, capsys, "plan", "--for", "trl", "--budget", "2e6", "--processes", "8",
                         "--out", tmp_path / "plan", *extra)
    assert code == 0, err
    return tmp_path / "plan"


def test_plan_lr_tuned_at_keeps_that_ns_lr_exactly(monkeypatch, capsys, tmp_path):
    plan = _plan(monkeypatch, capsys, tmp_path, "--lr", "1e-6", "--lr-tuned-at", "8")
    lrs = {}
    for cfg in sorted((plan / "runs").glob("*/config.yaml")):
        doc = yaml.safe_load(cfg.read_text())
        lrs[int(doc["num_generations"])] = doc["learning_rate"]
    assert lrs[8] == 1e-06  # exactly the user's lr, at the n they tuned it at
    assert "learning_rate: 1.0e-06" in next(p for p in (plan / "runs").glob("n8-*/config.yaml")).read_text()
    for n, v in lrs.items():  # the sqrt rule from there
        assert v == pytest.approx(1e-6 * math.sqrt(n / 8), rel=1e-12)
    record = json.loads((plan / "isosim_plan.json").read_text())
    assert record["request"]["lr_tuned_at"] == 8 and record["request"]["lr"] == 1e-6
    assert "tuned at n = 8" in (plan / "README.md").read_text()
    # without the flag, --lr is the lr at 1024 rollouts a step, as before
    plan2 = _plan(monkeypatch, capsys, tmp_path / "b", "--lr", "1e-6")
    n8 = yaml.safe_load(next((plan2 / "runs").glob("n8-*/config.yaml")).read_text())
    b_p = int(json.loads((plan2 / "isosim_plan.json").read_text())["b_p"])
    assert n8["learning_rate"] == pytest.approx(1e-6 * math.sqrt(8 * b_p / 1024), rel=1e-12)


@pytest.mark.parametrize("extra, words", [(["--lr-tuned-at", "8"], "give --lr too"),
                                          (["--lr", "1e-6", "--lr-tuned-at", "1"], "2 or more")])
def test_plan_lr_tuned_at_refusals(monkeypatch, capsys, tmp_path, extra, words):
    code, out, err = run(monkeypatch, capsys, "plan", "--for", "trl", "--budget", "2e6", "--out", tmp_path / "p", *extra)
    assert code == 2 and words in err and len(err.strip().splitlines()) == 1


def test_recommend_reads_back_each_runs_written_lr_and_where_it_was_tuned(monkeypatch, capsys, tmp_path):
    """A plan at one lr for every n, tuned at n = 8: its runs' records (simulated values) read back by
    recommend --runs --profile: each n's lr is what its config.yaml says, the anchor is the plan's, and
    the runs are read off the calibration (n = 2 at twice the lr the sqrt rule gives it from n = 8)."""
    from isosim.sim.profiles import write_profile

    plan = _plan(monkeypatch, capsys, tmp_path, "--lr", "1e-6", "--lr-tuned-at", "8", "--lr-rule", "constant",
                 "--n", "2,8,32")
    b_p = int(json.loads((plan / "isosim_plan.json").read_text())["b_p"])
    written = {}
    for cfg in sorted((plan / "runs").glob("*/config.yaml")):
        doc = yaml.safe_load(cfg.read_text())
        n = int(doc["num_generations"])
        written[n] = doc["learning_rate"]
        rows = [{"run_id": cfg.parent.name, "n": n, "b_p": b_p, "seed": 0, "step": i, "rollouts": float(i * b_p * n * 4),
                 "val_avg": 0.1 + 0.01 * i * (1 + n / 64), "n_train": 400, "n_val": 100} for i in range(6)]
        cfg.parent.joinpath("records.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert set(written.values()) == {1e-06}
    profile = write_profile(tmp_path / "profile.json", np.random.default_rng(0).uniform(0, 0.3, 400), k=16)
    code, out, err = run(monkeypatch, capsys, "recommend", "--runs", plan / "runs", "--profile", profile,
                         "--budget", "2e6", "--json")
    assert code == 0, err
    r = json.loads(out)
    lr = r["lr_read"]
    assert {int(n): v for n, v in lr["lr"].items() if int(n) in written} == written
    assert lr["anchor"] == {"lr": 1e-06, "batch": float(b_p * 8), "from": "the plan's --lr (isosim_plan.json)"}
    assert lr["rho"]["8"] == pytest.approx(1.0) and lr["rho"]["2"] == pytest.approx(2.0)
    assert not lr["at_calibration"] and r["method"] == partial.LR_EVERY
    assert "departs from what the calibration gives each n" in r["note"]


@pytest.mark.cpu_sensitive
def test_the_one_lr_for_n_8_predictions_follow_from_the_committed_cheap_part():
    """organism_const8/prediction_lr.json, recomputed by its script from the committed records (read
    to 5 % of each C only), gives the committed picks in every form and the cheap records' hashes."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("const8_predict", ROOT / "studies" / "scoring" / "const8_predict.py")
    cp = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(cp)
    committed = json.loads(cp.OUT.read_text())[cp.KEY]
    fresh = cp.predict()[cp.KEY]
    assert fresh["picks"] == committed["picks"]
    assert fresh["pooled_seeds_picks"] == committed["pooled_seeds_picks"]
    cheap = {k: v for k, v in committed["inputs"].items() if "records.jsonl" in k}
    assert len(cheap) == 16 and cheap == {k: v for k, v in fresh["inputs"].items() if "records.jsonl" in k}
    assert committed["lr_calibration"] == lrr.learner_calibration().as_dict()
