"""The simfit model read at each run's lr (isosim.predict.lr_read), in every form of recommend --runs,
and plan's --lr-tuned-at written and read back."""

from __future__ import annotations

import importlib.util
import json
import math
from pathlib import Path

import numpy as np
import pytest
import yaml
from cli_helpers import run

from isosim.errors import IsosimError
from isosim.predict import lr_read as lrr
from isosim.predict import partial
from isosim.validation import adaptive as ad
from isosim.validation import plane_methods as pm

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "studies" / "results"
CONST = RESULTS / "organism_hard_const" / "hard-128"


def frozen_prior():
    return lrr.prior_and_band()


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


def _sqrt_sweep():
    return RESULTS / "organism_hard" / "hard-128"


@pytest.mark.cpu_sensitive
def test_every_n_at_the_calibration_reads_the_one_n_the_frozen_method_was_scored_on():
    bank = pm.bank_of("organism_hard/hard-128")
    prior, band = frozen_prior()
    sw = ad.load_sweep(_sqrt_sweep())
    budget = 3e5
    grid = ad.grid_at(sorted(sw["runs"]), budget, sw["b_p"])
    lrs = {n: 3e-4 * math.sqrt(16 * n / 1024) for n in grid}
    every = {n: {0: ad.reveal(sw["runs"][n][0], 0.05 * budget)} for n in grid}
    got = lrr.read_runs(bank, every, grid, budget, lrs, lrr.Anchor(3e-4, 1024), prior, band, lrr.learner_calibration(),
                        every=True)
    pts = [(8, r, v) for r, v in every[8][0]]
    frozen = lrr.choose_calibrated(bank, pts, grid, budget, prior, ("log_lr", "log_h"), band, stay=(8,))
    assert got["form"] == "every n" and got["read_as"] == "one n" and got["at_calibration"]
    for reading in ("best", "final"):
        assert got[reading]["pick"] == frozen[reading]["pick"]


def test_over_stepping_costs_value_only_above_the_calibration():
    bank = pm.bank_of("organism_hard/hard-128")
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
    # without the flag, a TRL user's --lr is taken as tuned at TRL's default num_generations (8): the same runs,
    # said as an assumption; for verl, --lr alone is the lr at 1024 rollouts a step
    plan2 = _plan(monkeypatch, capsys, tmp_path / "b", "--lr", "1e-6")
    for n, v in lrs.items():
        doc = yaml.safe_load(next((plan2 / "runs").glob(f"n{n}-*/config.yaml")).read_text())
        assert doc["learning_rate"] == v, n
    assert json.loads((plan2 / "isosim_plan.json").read_text())["request"]["lr_tuned_assumed"] is True
    assert "taken as tuned at TRL's default num_generations, n = 8" in (plan2 / "README.md").read_text()
    code, _, err = run(monkeypatch, capsys, "plan", "--for", "verl", "--budget", "2e6", "--processes", "8",
                       "--lr", "1e-6", "--out", tmp_path / "c")
    assert code == 0, err
    b_p = int(json.loads((tmp_path / "c" / "isosim_plan.json").read_text())["b_p"])
    n8 = next((tmp_path / "c" / "runs").glob("n8-*/overrides.txt")).read_text()
    assert f"actor_rollout_ref.actor.optim.lr={1e-6 * math.sqrt(8 * b_p / 1024)!r}" in n8


def test_plan_lr_tuned_at_another_b_p_scales_every_run_from_that_batch(monkeypatch, capsys, tmp_path):
    """An lr tuned at n = 8 and B_p = 16, for a plan of another B_p: every run's lr is the rule's from the
    batch 16 x 8, said so in the README; recommend --runs reads the same anchor back from the plan."""
    from isosim.predict.partial import _plan_anchor

    plan = _plan(monkeypatch, capsys, tmp_path, "--lr", "1e-6", "--lr-tuned-at", "8", "--lr-tuned-b-p", "16")
    record = json.loads((plan / "isosim_plan.json").read_text())
    b_p = int(record["b_p"])
    assert b_p != 16 and record["request"]["lr_tuned_b_p"] == 16
    for cfg in sorted((plan / "runs").glob("*/config.yaml")):
        doc = yaml.safe_load(cfg.read_text())
        n = int(doc["num_generations"])
        assert doc["learning_rate"] == pytest.approx(1e-6 * math.sqrt(b_p * n / 128), rel=1e-12), n
    readme = " ".join((plan / "README.md").read_text().split())
    assert "tuned at n = 8 at B_p = 16 (--lr-tuned-at, --lr-tuned-b-p)" in readme
    assert f"this plan's B_p is {b_p}, so no run has that batch unless its B_p x n is 128" in readme
    assert _plan_anchor(plan / "runs", b_p) == (1e-6, 128.0)


@pytest.mark.parametrize("extra, words", [(["--lr-tuned-at", "8"], "give --lr too"),
                                          (["--lr", "1e-6", "--lr-tuned-at", "1"], "2 or more"),
                                          (["--lr", "1e-6", "--lr-tuned-b-p", "16"], "give --lr and --lr-tuned-at"),
                                          (["--lr", "1e-6", "--lr-tuned-at", "8", "--lr-tuned-b-p", "0"], "1 or more")])
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


def test_recommend_partial_reads_the_rule_from_the_runs_lr_values_when_no_config_names_it(tmp_path):
    import pandas as pd

    from isosim.predict.partial import lr_rule_of

    sqrt = pd.DataFrame({"n": [2, 8, 64], "lr": [3e-4 * np.sqrt(16 * n / 1024) for n in (2, 8, 64)]})
    assert lr_rule_of(tmp_path, sqrt, 16) == ("sqrt", "the runs' lr across n")
    const = pd.DataFrame({"n": [2, 8], "lr": [3e-4, 3e-4]})
    assert lr_rule_of(tmp_path, const, 16)[0] == "constant"
    one = pd.DataFrame({"n": [8], "lr": [3e-4]})
    assert lr_rule_of(tmp_path, one, 16)[1].startswith("default")
    assert lr_rule_of(tmp_path, one, 16, "sqrt") == ("sqrt", "--lr-rule")
    (tmp_path / "n8_s0").mkdir()
    (tmp_path / "n8_s0" / "records.jsonl").write_text("{}\n")
    (tmp_path / "n8_s0" / "config.json").write_text(json.dumps({"lr_rule": "constant"}))
    with pytest.raises(IsosimError, match="contradicts the runs' config.json"):
        lr_rule_of(tmp_path, one, 16, "sqrt")


@pytest.mark.cpu_sensitive
def test_the_two_rules_compared_recompute_and_show_the_lr_n_interaction():
    """const_vs_sqrt.json is what its script computes; at a constant lr n = 2 has collapsed and n = 64,
    whose lr is the same under both rules, is the same run."""
    spec = importlib.util.spec_from_file_location("const_vs_sqrt", ROOT / "studies" / "organism" / "const_vs_sqrt.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    committed = json.loads(mod.OUT.read_text())
    got = mod.build()
    assert got["measured"] == committed["measured"]
    assert got["calibration"]["shared"] == pytest.approx(committed["calibration"]["shared"], rel=1e-6)
    m = got["measured"]
    assert m["constant"]["2"]["20000"]["mean"] < 0.05 < m["sqrt"]["2"]["20000"]["mean"]
    assert m["constant"]["64"] == m["sqrt"]["64"]


def test_the_partial_note_says_when_the_runs_lr_is_not_the_calibrations():
    """recommend --runs --profile reads each run's lr (isosim.predict.lr_read): the note names the n whose
    lr departs from what the calibration gives them, or says that no lr was found; the 07a27e7 method's
    record on the constant-lr sweep is in docs/organism.md (tests/test_measured_numbers.py)."""
    from isosim.predict.partial import LR_EVERY, LR_ONE, note

    base = {"measured": {"8": 5e4}, "simulated": [2, 4], "scores_nine_sweeps": None, "frozen": False,
            "cheap_share": 0.05, "scored_share": 0.05, "method": LR_ONE}
    said = note({**base, "lr_read": {"rho": None}})
    assert "No run's lr was found" in said
    off = {"rho": {"2": 2.0, "8": 1.0, "32": 0.5}, "at_calibration": False,
           "anchor": {"lr": 1e-6, "batch": 128.0, "from": "--lr-tuned-at 8"}}
    said = note({**base, "lr_read": off})
    assert "departs from what the calibration gives each n" in said and "n = 2: x2" in said and "n = 32: x0.5" in said
    assert "n = 8: x" not in said and "--lr-tuned-at 8" in said
    said = note({**base, "method": LR_EVERY, "measured": {"2": 5e4, "8": 5e4, "32": 5e4}, "lr_read": off})
    assert "cannot see a small n fall later" in said and "From one n's runs alone the other n would be" in said
    said = note({**base, "lr_read": off})
    assert "With cheap runs of every n the model is fitted to each n's own curve" in said  # why the forms differ
    at = {**off, "rho": {"2": 1.0, "8": 1.0}, "at_calibration": True}
    assert "read as the frozen method on one n" in note({**base, "lr_read": at})


def test_the_lr_read_note_carries_each_forms_prospective_record_from_its_read_out(tmp_path):
    """Where the runs' lr departs from the calibration, the note says what that form scored on the sweep
    it was frozen before (organism_const8/measured.json, both seeds pooled), read from the file: a
    changed read-out changes the line, and a missing one drops it rather than inventing it."""
    from isosim.predict import partial as pa

    doc = json.loads(pa.PROSPECTIVE_FILE.read_text())
    for method, form in pa.PROSPECTIVE_FORMS.items():
        got = doc["lr_read_bar"]["summary"][form]["pooled"]
        rows = [r for r in doc["lr_read_bar"]["rows"] if r["form"] == form and r["version"] == "pooled"]
        said = pa.prospective_record(method)
        assert "organism-hard-256-const8" in said and "1e5, 3e5, 1e6" in said
        assert f"picked n = {'/'.join(str(r['picks'][0]) for r in rows if r['reading'] == 'best')} " in said
        assert f"no higher than a fixed n = 8's in {got['no_higher_than_fixed']} of 6" in said
        assert f"best n in {got['within_1se']} (asked: 6 and 5)" in said
        assert ("it met its bar" if got["meets"] else "it missed its bar") in said
        off = {"rho": {"2": 2.0, "8": 1.0}, "at_calibration": False, "anchor": {"lr": 1e-6, "batch": 128.0, "from": "x"}}
        base = {"measured": {"8": 5e4}, "simulated": [2], "scores_nine_sweeps": None, "frozen": False,
                "cheap_share": 0.05, "scored_share": 0.05, "method": method, "lr_read": off}
        assert said in pa.note(base)
        assert said not in pa.note({**base, "lr_read": {**off, "rho": {"2": 1.0, "8": 1.0}, "at_calibration": True}})
    changed = json.loads(json.dumps(doc))
    changed["lr_read_bar"]["summary"]["lr-read one n"]["pooled"].update(within_1se=5, meets=True)
    (tmp_path / "m.json").write_text(json.dumps(changed))
    assert "best n in 5 (asked: 6 and 5): it met its bar" in pa.prospective_record(pa.LR_ONE, tmp_path / "m.json")
    assert pa.prospective_record(pa.LR_ONE, tmp_path / "missing.json") == ""


def _counted_loads(monkeypatch) -> list:
    """The reads of the runs (:func:`isosim.integrations.load_runs`) outside the frozen direct reader
    (isosim/predict/from_runs.py, hash-checked by plane_method.json, reads the folder or table it is
    handed itself)."""
    import inspect

    import isosim.integrations as integrations

    real, calls = integrations.load_runs, []

    def counted(*a, **k):
        if not any(f.filename.endswith("from_runs.py") for f in inspect.stack()[1:3]):
            calls.append(a)
        return real(*a, **k)

    monkeypatch.setattr(integrations, "load_runs", counted)
    return calls


def _cut(dst: Path, names: tuple[str, ...], upto: float) -> Path:
    for name in names:
        src = CONST / name
        (dst / name).mkdir(parents=True)
        (dst / name / "config.json").write_text((src / "config.json").read_text())
        rows = [x for x in (src / "records.jsonl").read_text().splitlines() if json.loads(x)["rollouts"] <= upto]
        (dst / name / "records.jsonl").write_text("\n".join(rows) + "\n")
    return dst


def test_recommend_runs_reads_the_runs_once_for_the_reader_each_runs_lr_and_the_lr_note(tmp_path, monkeypatch, capsys):
    """The direct reader, each run's lr and the lr note come from one reading of the runs: the note
    still names the n whose lr departs from the calibration (every n at 3e-4, set at 1,024)."""
    runs = _cut(tmp_path / "runs", ("n8_bp16_s0", "n8_bp16_s1", "n64_bp16_s0", "n64_bp16_s1"), 5e3)
    calls = _counted_loads(monkeypatch)
    code, out, err = run(monkeypatch, capsys, "recommend", "--runs", runs, "--budget", "1e5", "--json")
    assert code == 0, err
    assert len(calls) == 1
    r = json.loads(out)
    assert [e["lr"] for e in r["lr"]["each"].values()] == pytest.approx([3e-4] * 4, rel=1e-12)
    assert r["lr_read"]["rho"]["8"] == pytest.approx(math.sqrt(8), rel=1e-12) and r["lr_read"]["rho"]["64"] == pytest.approx(1.0)
    # both ways the cheap part misleads at one lr: small n fall later, large n rise later (both one-lr sweeps'
    # n* at 1e6, in both readings, is 64 or more: read from their read-outs)
    line = " ".join(r["lr_read"]["line"].split())
    assert "cannot see a small n that over-steps fall later, nor a large n that under-steps rise later" in line
    from measured_helpers import load

    const = load("organism_hard_const/measured.json")["rules"]
    c8 = load("organism_const8/measured.json")["readings"]
    at_c = [r["best"] for reading in ("best", "final") for r in const[reading] if r["rule"] == "constant" and r["budget"] == 1e6]
    at_c += [next(c for c in c8[reading]["n_star"] if c["budget"] == 1e6)["n_star"] for reading in ("best", "final")]
    assert len(at_c) == 4 and min(at_c) >= 64 and max(at_c) <= 256 and "n = 64-256 led by 1e6" in line


def test_runs_of_one_n_at_two_lrs_are_refused_by_the_one_check_wherever_the_lr_is_read(tmp_path):
    """An lr read from a run's settings file (not its records) goes through the records' check too:
    two seeds of n = 8 at two lrs are not seeds of one n."""
    import pandas as pd

    for seed, lr in ((0, 1e-6), (1, 2e-6)):
        d = tmp_path / f"n8_s{seed}"
        d.mkdir()
        (d / "records.jsonl").write_text("{}\n")
        (d / "config.json").write_text(json.dumps({"lr": lr, "lr_rule": "constant"}))
    df = pd.DataFrame({"run_id": ["n8_s0", "n8_s1"], "n": [8, 8], "b_p": [16, 16], "seed": [0, 1]})
    with pytest.raises(IsosimError, match=r"n = 8 \(B_p 16\) was run at 2 learning rates.*not seeds of one n"):
        partial.runs_lrs(tmp_path, df, [2, 8, 32], 16, "constant")
    (tmp_path / "n8_s1" / "config.json").write_text(json.dumps({"lr": 1e-6, "lr_rule": "constant"}))
    lrs, _ = partial.runs_lrs(tmp_path, df, [2, 8, 32], 16, "constant")
    assert lrs == {2: 1e-6, 8: 1e-6, 32: 1e-6}
    assert partial.runs_lrs(tmp_path, df, [2, 8], 16, "sqrt")[0][2] == pytest.approx(0.5e-6, rel=1e-12)
