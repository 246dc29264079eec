"""The frozen methods are not live modules: each committed prediction names the commit that made it
(its sweep's manifest.json, ``prediction_commit``), and is replayed here from that commit's own
files; today's one model (isosim.predict.lr_read) at the frozen methods' recorded parameters gives
the same picks."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import numpy as np
import pytest

from isosim.errors import IsosimError
from isosim.predict import lr_read as lrr
from isosim.validation import adaptive as ad
from isosim.validation import plane_methods as pm

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "studies" / "results"
CONST = "studies/results/organism_hard_const/prediction_simfit_lr.json"
CONST8 = "studies/results/organism_const8/prediction_lr.json"
SQRT = "studies/results/organism_hard/prediction_simfit.json"

REPLAYS = {
    # prediction file: (key, the script that wrote it, what it read besides the code)
    CONST: ("organism-hard-128-const", "studies/scoring/simfit_lr_const.py",
            ("studies/results/organism_hard/hard-128", "studies/results/organism_hard/prediction_simfit.json",
             "studies/results/organism_hard/simfit_bank_clusters64.json", "studies/results/organism_hard_const/hard-128",
             "studies/results/simfit_method.json")),
    CONST8: ("organism-hard-256-const8", "studies/scoring/const8_predict.py",
             ("studies/results/organism_const8/hard-256", "studies/results/organism_const8/simfit_bank_clusters64.json",
              "studies/results/organism_lr_grid/calibration.json", "studies/results/simfit_method.json")),
}


def _study():
    """``studies/scoring/simfit_lr_const.py``: the method frozen at 07a27e7 on the constant-lr sweep,
    recomputed with lr_read at 07a27e7's parameters."""
    spec = importlib.util.spec_from_file_location("simfit_lr_const", ROOT / "studies" / "scoring" / "simfit_lr_const.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


KEYS = {CONST: "organism-hard-128-const", CONST8: "organism-hard-256-const8", SQRT: "organism-hard-128"}


def entry(file: str) -> dict:
    """The committed prediction of ``file``."""
    return json.loads((ROOT / file).read_text())[KEYS[file]]


def made_at(file: str) -> str:
    """The commit that made ``file``'s prediction, as its sweep's manifest records it."""
    manifest = json.loads(((ROOT / file).parent / "manifest.json").read_text())
    found = [p["prediction_commit"]["commit"] for s in manifest["sweeps"].values() for p in s["predictions"]
             if p["file"] == file]
    assert len(found) == 1, (file, found)
    return found[0]


def _missing(commit: str) -> str | None:
    if not (ROOT / ".git").exists():
        return "not a git checkout: the commit that made the prediction cannot be replayed"
    res = subprocess.run(["git", "cat-file", "-e", f"{commit}^{{commit}}"], cwd=ROOT, capture_output=True)
    return None if res.returncode == 0 else f"this checkout lacks commit {commit[:7]} (a shallow clone): nothing to replay"


@pytest.mark.cpu_sensitive
@pytest.mark.parametrize("file", sorted(REPLAYS))
def test_a_frozen_prediction_replays_from_the_commit_that_made_it(file, tmp_path):
    """The recorded commit's code and inputs, extracted with git archive and run in a child with that
    tree first on the path, write the committed entry: the code it hashed is that commit's, and the
    picks (every form, per seed and pooled) and fitted numbers are the committed ones."""
    key, script, reads = REPLAYS[file]
    commit = made_at(file)
    why = _missing(commit)
    if why:
        pytest.skip(why)
    tree = tmp_path / "tree"
    tree.mkdir()
    archive = subprocess.run(["git", "archive", "--format=tar", commit, "isosim", "llm_runs", script, *reads], cwd=ROOT,
                             capture_output=True, check=True).stdout
    (tmp_path / "tree.tar").write_bytes(archive)
    with tarfile.open(tmp_path / "tree.tar") as tar:
        tar.extractall(tree, filter="data")
    committed = entry(file)
    for rel, sha in committed["inputs"].items():
        if "records.jsonl" not in rel and not rel.startswith("studies/results/"):  # the code the prediction hashed
            assert hashlib.sha256((tree / rel).read_bytes()).hexdigest() == sha, f"{rel} at {commit[:7]} is not the code hashed"
    (tree / file).unlink(missing_ok=True)  # written afresh by the replay, never read from the commit
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tree), *filter(None, [os.environ.get("PYTHONPATH")])]),
           "MPLBACKEND": "Agg"}
    res = subprocess.run([sys.executable, str(tree / script)], cwd=tree, env=env, capture_output=True, text=True,
                         timeout=900)
    assert res.returncode == 0, res.stderr[-3000:]
    fresh = json.loads((tree / file).read_text())[key]
    assert fresh["picks"] == committed["picks"] and fresh["pooled_seeds_picks"] == committed["pooled_seeds_picks"]
    assert fresh["inputs"] == committed["inputs"]
    assert len(fresh["replays"]) == len(committed["replays"])
    for a, b in zip(fresh["replays"], committed["replays"]):
        for form in [k for k in b if isinstance(b[k], dict) and "theta" in b[k]] or [None]:
            x, y = (a, b) if form is None else (a[form], b[form])
            assert x["theta"] == pytest.approx(y["theta"], rel=1e-6, abs=1e-9), form
            assert x["best"]["pick"] == y["best"]["pick"] and x["final"]["pick"] == y["final"]["pick"], form


def test_a_script_a_prediction_hashed_is_kept_as_it_ran_or_names_the_commit_it_ran_at():
    """const8_predict.py is the script prediction_lr.json hashed, byte for byte (it imports the
    modules of its commit: it runs from there, above); simfit_lr_const.py has changed since its
    prediction and says which commit wrote the committed file."""
    want = entry(CONST8)["inputs"]["studies/scoring/const8_predict.py"]
    assert hashlib.sha256((ROOT / "studies/scoring/const8_predict.py").read_bytes()).hexdigest() == want
    now = (ROOT / "studies/scoring/simfit_lr_const.py").read_text()
    assert hashlib.sha256(now.encode()).hexdigest() != entry(CONST)["inputs"]["studies/scoring/simfit_lr_const.py"]
    assert "written by this script at\n# commit 07a27e7" in now and "tests/test_frozen_replay.py" in now


def test_the_replay_reads_the_commit_each_manifest_records():
    """Each replayed prediction's commit is the manifest's (07a27e7 for the method frozen there), and
    a file no manifest lists is refused, not guessed."""
    assert made_at(CONST).startswith(lrr.COMMIT_07A27E7)
    assert made_at(CONST8).startswith("8f86290")
    with pytest.raises(AssertionError):
        made_at("studies/results/organism_hard_const/nothing.json")


def test_the_frozen_modules_are_gone_and_their_parameters_are_lr_reads():
    """isosim/predict holds one simfit model and the forms that read it: no module per frozen method."""
    for gone in ("simfit_frozen", "simfit_lr"):
        assert not (ROOT / "isosim" / "predict" / f"{gone}.py").exists()
    assert (pm.CALIBRATIONS[lrr.FROZEN]["free"], pm.CALIBRATIONS[lrr.TWO_RUNS]["free"]) == (lrr.ONE_FREE, lrr.EVERY_FREE)
    assert pm.CALIBRATIONS[lrr.FROZEN]["cheap"] == {8: 0.05} and pm.CALIBRATIONS[lrr.TWO_RUNS]["cheap"] == {2: 0.025, 32: 0.025}
    assert lrr.CALIBRATION_07A27E7 == lrr.LrCalibration(a=1.0, decay=0.0, decay_sd=1.0)
    assert lrr.frozen()["commit"] == entry(CONST)["freeze_commit"] == entry(CONST8)["frozen_commit"]
    # only the rule's exponent is read: rho = (B_p n / 1024) ** (e - 0.5), whatever the runs' lr
    for base, ref in ((3e-4, 1024.0), (1.0607e-4, 128.0), (1e-6, 64.0)):
        for rule, e in (("constant", 0.0), ("sqrt", 0.5), ("linear", 1.0)):
            lrs = lrr.lrs_by_rule([2, 8, 64, 256], 16, base, ref, rule)
            rho = lrr.rhos(lrs, 16, lrr.anchor_07a27e7(base, ref, rule))
            assert rho == pytest.approx({n: (16 * n / 1024) ** (e - 0.5) for n in lrs}, rel=1e-12)


@pytest.mark.cpu_sensitive
def test_lr_read_at_07a27e7s_parameters_gives_its_committed_picks_on_the_constant_lr_sweep():
    """Today's model at the parameters prediction_simfit_lr.json records (its prior, tie band, decay
    prior sd, rule, cheap run; the anchor at 1,024) gives every committed pick, seed by seed and
    pooled, and the committed fitted numbers."""
    want = entry(CONST)
    sweep = RESULTS / "organism_hard_const" / "hard-128"
    sw = ad.load_sweep(sweep)
    cfg = json.loads((sweep / "n8_bp16_s0" / "config.json").read_text())
    assert (want["lr_rule"], want["cheap_runs"], want["decay_prior_sd"]) == (cfg["lr_rule"], {"8": 0.05}, 1.0)
    prior = {p: tuple(v) for p, v in want["prior"].items()}
    cal = lrr.LrCalibration(decay_sd=want["decay_prior_sd"])
    anchor = lrr.anchor_07a27e7(cfg["base_lr"], cfg["lr_ref_batch"], want["lr_rule"])
    rho = lrr.rhos(lrr.lrs_by_rule(sorted(sw["runs"]), sw["b_p"], cfg["base_lr"], cfg["lr_ref_batch"], want["lr_rule"]),
                   sw["b_p"], anchor)
    bank = pm.bank_of("organism_hard_const/hard-128")
    detail = iter(want["replays"])
    for i, budget in enumerate(want["budgets"]):
        grid = ad.grid_at(sorted(sw["runs"]), budget, sw["b_p"])
        pooled = []
        for seed in sw["seeds"]:
            pts = [(8, float(r), float(v)) for r, v in ad.reveal(sw["runs"][8][seed], 0.05 * budget)]
            pooled += pts
            got = lrr.choose(bank, pts, grid, budget, rho, prior, lrr.ONE_FREE, want["tie_band"], (8,), cal)
            rep = next(detail)
            assert (rep["budget"], rep["seed"], rep["grid"]) == (budget, seed, grid)
            assert got["theta"] == pytest.approx(rep["theta"], rel=1e-6, abs=1e-9)
            for reading in ("best", "final"):
                assert got[reading]["pick"] == want["picks"][reading][f"seed {seed}"][i]
                assert got[reading]["predicted_gain"] == pytest.approx(rep[reading]["predicted_gain"], abs=1e-6)
        got = lrr.choose(bank, pooled, grid, budget, rho, prior, lrr.ONE_FREE, want["tie_band"], (8,), cal)
        for reading in ("best", "final"):
            assert got[reading]["pick"] == want["pooled_seeds_picks"][reading][i]


@pytest.mark.cpu_sensitive
def test_lr_read_gives_every_committed_form_of_the_one_lr_for_n_8_predictions():
    """prediction_lr.json (organism-hard-256-const8): the 07a27e7 form is this model at 07a27e7's
    parameters, the lr-read forms at the entry's anchor and lr calibration, the cheap leader the
    cheap curves' leader; each per seed and pooled, from the records up to 5 % of each C."""
    want = entry(CONST8)
    st = want["lr_settings"]
    sweep = RESULTS / "organism_const8" / "hard-256"
    sw = ad.load_sweep(sweep)
    bank = json.loads((RESULTS / "organism_const8" / "simfit_bank_clusters64.json").read_text())["banks"]["hard-t0.6-256"]
    bank.setdefault("n_train", bank["setting"]["n_train"])
    prior = {p: tuple(v) for p, v in want["prior"].items()}
    band = want["tie_band"]
    lrs = {int(n): v for n, v in want["lr"].items()}
    assert lrs == lrr.lrs_by_rule(lrs, st["b_p"], st["base_lr"], st["lr_ref_batch"], st["lr_rule"])
    assert want["lr_calibration"] == lrr.learner_calibration().as_dict()
    cal = lrr.LrCalibration(**want["lr_calibration"])
    anchor = lrr.Anchor(want["anchor"]["lr"], want["anchor"]["batch"])
    old = lrr.anchor_07a27e7(st["base_lr"], st["lr_ref_batch"], st["lr_rule"])
    detail = iter(want["replays"])
    for i, budget in enumerate(want["budgets"]):
        grid = ad.grid_at(sorted(sw["runs"]), budget, sw["b_p"])
        for who, seeds in [(f"seed {s}", [s]) for s in sw["seeds"]] + [("pooled", list(sw["seeds"]))]:
            every = {n: {s: ad.reveal(sw["runs"][n][s], 0.05 * budget) for s in seeds} for n in grid}
            pts8 = [(8, float(r), float(v)) for c in every[8].values() for r, v in c]
            got = {"07a27e7": lrr.choose(bank, pts8, grid, budget, lrr.rhos(lrs, st["b_p"], old), prior, lrr.ONE_FREE,
                                         band, (8,), lrr.CALIBRATION_07A27E7),
                   "lr-read one n": lrr.read_runs(bank, {8: every[8]}, grid, budget, lrs, anchor, prior, band, cal, every=False),
                   "lr-read every n": lrr.read_runs(bank, every, grid, budget, lrs, anchor, prior, band, cal, every=True)}
            lead = lrr.cheap_leader(every)
            rep = next(detail)
            assert (rep["budget"], rep["who"], rep["grid"], rep["cheap_leader"]) == (budget, who, grid, lead)
            for form, g in got.items():
                assert g["theta"] == pytest.approx(rep[form]["theta"], rel=1e-6, abs=1e-9), form
            for reading in ("best", "final"):
                for form, g in got.items():
                    at = want["pooled_seeds_picks"][form][reading][i] if who == "pooled" else want["picks"][form][reading][who][i]
                    assert g[reading]["pick"] == at, (form, reading, who, budget)
                at = want["pooled_seeds_picks"]["cheap leader @5%"][reading][i] if who == "pooled" else \
                    want["picks"]["cheap leader @5%"][reading][who][i]
                assert lead == at


@pytest.mark.cpu_sensitive
def test_the_frozen_calibrations_committed_picks_are_the_model_at_its_recorded_parameters():
    """organism_hard/prediction_simfit.json (the frozen calibration, frozen before the second learner):
    at its recorded prior and tie band, each seed's n = 8 to 5 % of C at calibration
    (:func:`isosim.predict.lr_read.at_calibration_pick`) gives every committed pick and fit."""
    want = entry(SQRT)
    sw = ad.load_sweep(RESULTS / "organism_hard" / "hard-128")
    bank = pm.bank_of("organism_hard/hard-128")
    assert want["freeze_commit"] == lrr.frozen()["commit"] and want["prior"] == lrr.frozen()["prior_for_a_new_learner"]["prior"]
    for rep in want["replays"]:
        budget, seed = rep["budget"], rep["seed"]
        runs = {8: {seed: ad.reveal(sw["runs"][8][seed], 0.05 * budget)}}
        got = lrr.at_calibration_pick(bank, runs, rep["grid"], budget)
        assert got["method"] == lrr.FROZEN and got["tie_band"] == want["tie_band"]
        assert got["theta"] == pytest.approx(rep["theta"], rel=1e-6, abs=1e-9)
        for reading in ("best", "final"):
            assert got[reading]["pick"] == rep[reading]["pick"] == want["picks"][reading][f"seed {seed}"][
                want["budgets"].index(budget)]


@pytest.mark.parametrize("budget", [1e5, 1e6])
def test_under_the_sqrt_rule_07a27e7s_parameters_are_the_frozen_calibration(budget):
    """At 07a27e7's parameters, sqrt-rule runs are at the calibration (rho 1 for every n) and the
    picks and fit are the frozen calibration's (:func:`isosim.predict.lr_read.choose_calibrated`)."""
    bank = pm.bank_of("organism_hard/hard-128")
    prior, band = lrr.prior_and_band()
    sw = ad.load_sweep(RESULTS / "organism_hard" / "hard-128")
    pts = [(8, float(r), float(v)) for r, v in ad.reveal(sw["runs"][8][0], 0.05 * budget)]
    grid = ad.grid_at(sorted(sw["runs"]), budget, sw["b_p"])
    rho = lrr.rhos(lrr.lrs_by_rule(grid, 16, 3e-4, 1024.0, "sqrt"), 16, lrr.anchor_07a27e7(3e-4, 1024.0, "sqrt"))
    assert set(rho.values()) == {1.0}
    want = lrr.choose_calibrated(bank, pts, grid, budget, prior, lrr.ONE_FREE, band, stay=(8,))
    got = lrr.choose(bank, pts, grid, budget, rho, prior, lrr.ONE_FREE, band, (8,), lrr.CALIBRATION_07A27E7)
    assert got["theta"] == pytest.approx({**want["theta"], "decay": 0.0}, rel=1e-9, abs=1e-12)
    for reading in ("best", "final"):
        assert got[reading]["pick"] == want[reading]["pick"]
        assert got[reading]["within_band"] == want[reading]["within_band"]
        assert got[reading]["predicted_gain"] == pytest.approx(want[reading]["predicted_gain"], abs=1e-12)


def test_at_07a27e7s_parameters_a_falling_cheap_run_fits_a_decay_that_costs_small_n_most():
    """At a constant lr n = 8 (B = 128) walks 7 times as far a rollout as calibrated: seed 1's falling
    cheap run fits a decay, and it costs n = 2 more than 8, 8 more than 32, and n = 64 (B = 1,024,
    at the calibration) nothing."""
    bank = pm.bank_of("organism_hard/hard-128")
    prior, _ = lrr.prior_and_band()
    sw = ad.load_sweep(RESULTS / "organism_hard_const" / "hard-128")
    pts = [(8, float(r), float(v)) for r, v in ad.reveal(sw["runs"][8][1], 5e4)]
    ns = (2, 8, 32, 64)
    rho = lrr.rhos(lrr.lrs_by_rule(ns, 16, 3e-4, 1024.0, "constant"), 16, lrr.anchor_07a27e7(3e-4, 1024.0, "constant"))
    assert [lrr.excess(rho[n]) for n in ns] == pytest.approx([31, 7, 1, 0], abs=1e-12)
    got = lrr.fit(bank, pts, rho, prior, lrr.ONE_FREE, lrr.CALIBRATION_07A27E7)
    th = got["theta"]
    assert got["decay_fitted"] and th["decay"] > 0.1  # seed 1's n = 8 falls from .182 to .135 between 2.4e4 and 4.5e4
    cal = lrr.CALIBRATION_07A27E7
    loss = {n: lrr.value(bank, {**th, "decay": 0.0}, n, 1e6, "final", got["v0"], rho[n], cal)
            - lrr.value(bank, th, n, 1e6, "final", got["v0"], rho[n], cal) for n in ns}
    assert loss[2] > loss[8] > loss[32] > 0
    assert loss[64] == pytest.approx(0.0, abs=1e-12)
    with pytest.raises(IsosimError, match="step-0 evaluation"):
        lrr.fit(bank, [(8, 1000.0, 0.1)], rho, prior, lrr.ONE_FREE, cal)
    assert np.isfinite(th["log_lr"])
