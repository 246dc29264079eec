"""The lr-aware frozen method (isosim.predict.simfit_lr): the frozen method under the sqrt rule, a
decay for the walk beyond it under another rule, and its committed picks for the constant-lr sweep."""

from __future__ import annotations

import hashlib
import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest

from isosim.errors import IsosimError
from isosim.predict import simfit as sf
from isosim.predict import simfit_frozen as sff
from isosim.predict import simfit_lr as slr
from isosim.validation import adaptive as ad

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "studies" / "results"


def _study():
    spec = importlib.util.spec_from_file_location("simfit_lr_const", ROOT / "studies" / "scoring" / "simfit_lr_const.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_excess_walk_is_zero_under_the_calibrated_rule_and_grows_as_one_over_n_at_a_constant_lr():
    assert [slr.excess_walk(n, 16, "sqrt") for n in (2, 8, 64, 256)] == [0.0] * 4
    assert [slr.excess_walk(n, 16, "constant") for n in (2, 8, 32, 64, 128)] == pytest.approx([31, 7, 1, 0, 0])
    assert slr.excess_walk(128, 16, "linear") == pytest.approx(1.0)  # B = 2048: lr twice sqrt's, the walk 4x
    assert slr.excess_walk(32, 16, "linear") == 0.0
    with pytest.raises(IsosimError, match="unknown lr rule 'cosine'"):
        slr.excess_walk(8, 16, "cosine")


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


def _cheap_points(sweep: Path, seed: int, upto: float) -> list[tuple[int, float, float]]:
    sw = ad.load_sweep(sweep)
    return [(8, float(r), float(v)) for r, v in ad.reveal(sw["runs"][8][seed], upto)]


def _frozen_inputs():
    doc = sff.frozen()
    prior = {p: tuple(v) for p, v in doc["prior_for_a_new_learner"]["prior"].items()}
    return prior, sff.CALIBRATIONS[sff.FROZEN]["free"], float(doc["settings"]["tie_band_value"])


@pytest.mark.parametrize("budget", [1e5, 1e6])
def test_under_the_sqrt_rule_it_is_the_frozen_method_exactly(budget):
    bank = sff.bank_of("organism_hard/hard-128")
    prior, free, band = _frozen_inputs()
    pts = _cheap_points(RESULTS / "organism_hard" / "hard-128", 0, 0.05 * budget)
    grid = sff.grid_for(budget, 16)
    want = sff.choose(bank, pts, grid, budget, prior, free, band, stay=(8,))
    got = slr.choose(bank, pts, grid, budget, prior, free, band, (8,), "sqrt")
    assert got["theta"] == want["theta"]
    for reading in ("best", "final"):
        assert got[reading] == want[reading]


def test_at_a_constant_lr_a_falling_cheap_run_fits_a_decay_that_costs_small_n_most():
    bank = sff.bank_of("organism_hard/hard-128")
    prior, free, band = _frozen_inputs()
    pts = _cheap_points(RESULTS / "organism_hard_const" / "hard-128", 1, 5e4)
    got = slr.fit(bank, pts, prior, free, "constant")
    th = got["theta"]
    assert th["decay"] > 0.1  # seed 1's n = 8 falls from .182 to .135 between 2.4e4 and 4.5e4
    still = {**th, "decay": 0.0}
    loss = {n: slr.value(bank, still, n, 1e6, "final", got["v0"], "constant")
            - slr.value(bank, th, n, 1e6, "final", got["v0"], "constant") for n in (2, 8, 32, 64)}
    assert loss[2] > loss[8] > loss[32] > 0  # the walk beyond the sqrt rule: 31, 7, 1
    assert loss[64] == pytest.approx(0.0, abs=1e-12)  # n = 64 (B = 1,024) walks as calibrated
    assert slr.value(bank, still, 8, 1e6, "final", got["v0"], "constant") == sf.value(
        bank, slr.theta_under(still, "constant"), 8, 1e6, "final")


def test_a_decay_needs_the_step_zero_evaluation():
    bank = sff.bank_of("organism_hard/hard-128")
    prior, free, _ = _frozen_inputs()
    with pytest.raises(IsosimError, match="step-0 evaluation"):
        slr.fit(bank, [(8, 1000.0, 0.1)], prior, free, "constant")


@pytest.mark.cpu_sensitive
def test_the_committed_picks_for_the_constant_lr_sweep_recompute():
    """prediction_simfit_lr.json is what its script computes from the committed cheap records (and the
    script's guard: under the sqrt rule it reproduces prediction_simfit.json)."""
    study = _study()
    committed = json.loads(study.OUT.read_text())[study.KEY]
    got = study.predict()[study.KEY]
    assert got["picks"] == committed["picks"] and got["pooled_seeds_picks"] == committed["pooled_seeds_picks"]
    assert committed["lr_rule"] == "constant" and committed["cheap_runs"] == {"8": 0.05}
    for rel in ("isosim/predict/simfit_lr.py", "isosim/predict/simfit.py"):  # the method as frozen
        assert committed["inputs"][rel] == hashlib.sha256((ROOT / rel).read_bytes()).hexdigest(), f"{rel} changed since the freeze"
    for a, b in zip(got["replays"], committed["replays"]):
        assert a["theta"] == pytest.approx(b["theta"], rel=1e-6)


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
    assert "cannot see a small n fall later" in said
    at = {**off, "rho": {"2": 1.0, "8": 1.0}, "at_calibration": True}
    assert "read as the frozen method on one n" in note({**base, "lr_read": at})
