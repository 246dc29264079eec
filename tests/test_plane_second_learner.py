"""The second organism's sweep on the plane: listed under ``not_scored_yet`` while its runs are
short of their budget, scored apart (``second_learner``) once they are finished, and nothing of the
first learner's blocks changes either way. A small results tree: the committed F8 hard-128 and
hard-256 sweeps (the first learner: two, so that each has another to be chosen on) and the second
learner's committed records cut where its cheap part paused (the first step past 5e4 rollouts),
extended to 1e6 rollouts with made-up evaluations for the finished case; and the same learner's
constant-lr sweep (its committed cheap part, extended the same way), a block of its own."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pytest

from isosim.files import dumps_json
from isosim.predict import lr_read as lrr
from isosim.validation import plane as pl
from isosim.validation import plane_methods as pm
from isosim.validation import plane_report as rep

from json_helpers import assert_same_json  # tests/json_helpers.py

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "studies" / "results"
SECOND = "organism_hard/hard-128"
CONST = "organism_hard_const/hard-128"
CONST8 = "organism_const8/hard-256"
LINKED = ("sbi_bank.json", "plane_method.json", "scoreboard.json", "organism_f8/prediction.json",
          "organism_f8/profile_t06.json", "organism_f8/prediction_dynamics.json", "organism_hard/prediction.json",
          "organism_hard/profile_t06.json", "organism_hard_const/prediction.json")
FIRST = ["organism_f8/hard-128", "organism_f8/hard-256"]
METHODS = {"fixed n = 8": pm.constant(8), "fixed n = 2": pm.constant(2), lrr.FROZEN: pm.REGISTRY[lrr.FROZEN],
           pm.SIMFIT_LR: pm.REGISTRY[pm.SIMFIT_LR]}


def _cut(run: Path, pause: float = 5e4) -> None:
    """The run's records as its cheap part left them: up to its first step past ``pause`` rollouts."""
    lines = [line for line in (run / "records.jsonl").read_text().splitlines() if line.strip()]
    row = json.loads(lines[0])
    stop = (math.floor(pause / (int(row["n"]) * int(row["b_p"]))) + 1) * int(row["n"]) * int(row["b_p"])
    (run / "records.jsonl").write_text("".join(line + "\n" for line in lines if json.loads(line)["rollouts"] <= stop))


def _extend(run: Path, top: float = 1e6) -> None:
    """The cheap part, continued to the last whole step at ``top`` rollouts: 8 more
    evaluations, each n gaining at its own rate per e-fold of rollouts (n = 32 the fastest)."""
    rows = [json.loads(line) for line in (run / "records.jsonl").read_text().splitlines() if line.strip()]
    last = rows[-1]
    n, step = int(last["n"]), int(last["n"]) * int(last["b_p"])
    end = math.floor(top / step) * step
    rate = 0.03 - 0.004 * abs(math.log2(n) - 5) + 0.002 * int(last["seed"])
    extra = []
    for k in range(1, 9):
        r = float(round((last["rollouts"] * (end / last["rollouts"]) ** (k / 8)) / step) * step)
        extra.append({**last, "step": int(r // step), "rollouts": r, "val_avg": last["val_avg"] + rate * math.log(r / last["rollouts"])})
    (run / "records.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows + extra))


def _tree(tmp: Path, finished: bool, const: bool = False) -> Path:
    res = tmp / "results"
    for rel in LINKED:
        (res / rel).parent.mkdir(parents=True, exist_ok=True)
        (res / rel).symlink_to(RESULTS / rel)
    for sweep in [*FIRST, SECOND, *([CONST] if const else [])]:  # copied: the plane's search does not follow linked folders
        shutil.copytree(RESULTS / sweep, res / sweep)
    for run in sorted((res / SECOND).glob("n*_bp*_s*")) + sorted((res / CONST).glob("n*_bp*_s*")):
        _cut(run)
        if finished:
            _extend(run)
    return res


def _doc(res: Path) -> dict:
    stored = json.loads((RESULTS / "plane.json").read_text())["picks"]
    return json.loads(dumps_json(rep.document(res, readers=("steps",), stored=stored, methods=METHODS)))


@pytest.fixture(scope="module")
def docs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("plane_second")
    return {k: _doc(_tree(tmp / k, k != "cheap", k == "const")) for k in ("cheap", "finished", "const")}


def test_the_second_learner_is_found_by_the_name_its_bank_and_prediction_use():
    found = pl.find_sweeps(RESULTS, second_learner=True)
    assert found[SECOND] == RESULTS / SECOND and SECOND in pm.EXTRA_BANKS and pm.bank_of(SECOND) is not None
    assert set(found) - {SECOND, CONST, CONST8} == set(pl.find_sweeps(RESULTS))  # the nine, as the frozen studies read them
    assert pl.second_learner(SECOND) and not pl.held_out(SECOND) and pl.sweep_kind(SECOND) == "hard"
    assert pl.profile_path(SECOND, RESULTS) == RESULTS / "organism_hard" / "profile_t06.json"
    committed = json.loads((RESULTS / "organism_hard" / "prediction.json").read_text())["organism-hard-128"]
    profile = pl.profile_prediction(SECOND, RESULTS)
    assert [profile(b) for b in committed["budgets"]] == committed["n_star"]
    assert pl.calibrated_prediction(RESULTS / SECOND, RESULTS) is None and pl.dynamics_prediction(SECOND, RESULTS) is None


def test_the_constant_lr_sweep_is_found_apart_with_its_bank_prediction_and_rule():
    found = pl.find_sweeps(RESULTS, second_learner=True)
    assert found[CONST] == RESULTS / CONST and CONST not in pl.find_sweeps(RESULTS)
    assert pl.constant_lr(CONST) and pl.apart(CONST) and not pl.second_learner(CONST) and not pl.held_out(CONST)
    assert pl.apart(SECOND) and not pl.constant_lr(SECOND) and not pl.apart("organism_f8/hard-128")
    assert pm.bank_of(CONST) == pm.bank_of(SECOND)  # one setting, one bank: a bank has no lr rule
    assert pl.profile_path(CONST, RESULTS) == pl.profile_path(SECOND, RESULTS)
    committed = json.loads((RESULTS / "organism_hard_const" / "prediction.json").read_text())["organism-hard-128-const"]
    profile = pl.profile_prediction(CONST, RESULTS)
    assert [profile(b) for b in committed["budgets"]] == committed["n_star"]
    assert pl.calibrated_prediction(RESULTS / CONST, RESULTS) is None and pl.dynamics_prediction(CONST, RESULTS) is None
    assert pm.lr_rule(pl._settings(RESULTS / CONST)) == "constant" and pm.lr_rule(pl._settings(RESULTS / SECOND)) == "sqrt"
    assert pm.lr_rule({}) == "sqrt"
    with pytest.raises(Exception, match="unknown lr rule"):
        pm.lr_rule({"lr_rule": "cosine"})


def test_the_first_learners_sweep_at_one_lr_for_n_8_is_a_block_of_its_own_with_its_own_bank_and_profile():
    found = pl.find_sweeps(RESULTS, second_learner=True)
    assert found[CONST8] == RESULTS / CONST8 and CONST8 not in pl.find_sweeps(RESULTS)
    assert pl.constant_lr_at_8(CONST8) and pl.apart(CONST8) and pl.apart_block(CONST8) == "constant_lr_at_8"
    assert not (pl.constant_lr(CONST8) or pl.second_learner(CONST8) or pl.held_out(CONST8))
    assert pl.profile_path(CONST8, RESULTS) == RESULTS / "organism_f8" / "profile_t06.json"  # the first learner's
    bank = pm.bank_of(CONST8)
    assert bank is not None and bank != pm.bank_of(SECOND) and bank["n_train"] == 256
    assert pl.profile_prediction(CONST8, RESULTS) is None  # none was committed for it
    assert pl.calibrated_prediction(RESULTS / CONST8, RESULTS) is None and pl.dynamics_prediction(CONST8, RESULTS) is None
    settings = pl._settings(RESULTS / CONST8)
    assert pm.lr_rule(settings) == "constant"
    lrs, anchor = pm.runs_lr(settings, [2, 8, 256])
    assert list(lrs.values()) == pytest.approx([3e-4 * math.sqrt(128 / 1024)] * 3, rel=1e-12)  # n = 8's sqrt-rule lr
    assert (anchor.lr, anchor.batch) == (pytest.approx(3e-4 * math.sqrt(128 / 1024), rel=1e-12), 128)


def test_unfinished_second_learner_is_listed_not_scored(docs):
    doc = docs["cheap"]
    assert doc["not_scored_yet"] == {SECOND: "16 run(s) short of their budget"}
    assert sorted(doc["sweeps"]) == FIRST and doc["second_learner"] == {}


def test_finished_second_learner_is_scored_apart(docs):
    cheap, doc = docs["cheap"], docs["finished"]
    assert doc["not_scored_yet"] == {} and sorted(doc["sweeps"]) == FIRST + [SECOND]
    sw = doc["sweeps"][SECOND]
    assert not sw["held_out"] and sw["budgets"][0] >= pl.MIN_BUDGET and sw["budgets"][-1] == pytest.approx(1e6, rel=0.01)
    block = doc["second_learner"]
    assert block["sweeps"] == [SECOND] and block["summary"] == sw["summary"]
    replays = 2 * len(sw["budgets"])
    for m in ("fixed n = 8", "fixed n = 2", "profile-only", "cheap leader @0.05", "steps @0.05", lrr.FROZEN,
              rep.LOSO_READER, "successive halving (C/16)", "hyperband"):
        assert block["summary"][m]["replays"] == replays, m
        assert set(block["summary"][m]) >= {"best", "final", "mean_overhead"}
    assert "isosim predict" not in block["summary"] and "dynamics fit" not in block["summary"]
    for reading in ("best", "final"):
        h = block["hindsight"][reading]
        assert h["replays"] == replays and {2, 8, 32} <= set(map(int, h["per_n"]))
    # the made-up continuation favours n = 32 at the top budgets: the hindsight n is not the floor
    assert block["hindsight"]["best"]["n"] > 2
    # the LOSO reader on the second learner is chosen on the first learner's sweeps only
    assert doc["loso"]["reader_choice"][SECOND]["trained_on"] == FIRST
    assert SECOND not in doc["loso"]["isosim_predict_choice"]
    # the simfit bar gains the second learner's block, its replays only
    frozen = doc["simfit"]["blocks"]["second_learner"][lrr.FROZEN]
    assert frozen["overhead"] == block["summary"][lrr.FROZEN]["mean_overhead"] and frozen["not_8"]["best"] <= replays
    assert cheap["simfit"]["blocks"]["second_learner"] == {}
    # nothing of the first learner's blocks moves when the second learner's sweep is scored
    for key in ("overall", "held_out", "all_sweeps", "hindsight", "dominance", "prospective"):
        assert doc[key] == cheap[key], key
    assert {k: v for k, v in doc["simfit"]["blocks"].items() if k != "second_learner"} == \
        {k: v for k, v in cheap["simfit"]["blocks"].items() if k != "second_learner"}
    for name in FIRST:
        assert doc["sweeps"][name] == cheap["sweeps"][name], name
        assert doc["loso"]["reader_choice"][name] == cheap["loso"]["reader_choice"][name]


COMMITTED = json.loads((RESULTS / "plane.json").read_text())
LOSO_ONLY = {rep.LOSO_READER}
"""second-learner summaries chosen on all nine first-learner sweeps (tests/test_plane.py's full build)"""


@pytest.fixture(scope="module")
def committed_doc(tmp_path_factory):
    """The plane of the first learner's two F8 sweeps and the second learner's committed, finished
    records (no cut, no made-up continuation)."""
    res = tmp_path_factory.mktemp("plane_committed") / "results"
    for rel in LINKED:
        (res / rel).parent.mkdir(parents=True, exist_ok=True)
        (res / rel).symlink_to(RESULTS / rel)
    for sweep in [*FIRST, SECOND]:
        shutil.copytree(RESULTS / sweep, res / sweep)
    return _doc(res)


@pytest.mark.cpu_sensitive
def test_the_committed_second_learner_block_is_its_records(committed_doc):
    """plane.json's ``second_learner`` block, rebuilt from the committed records and stored picks:
    its sweeps, every method's summary (but the reader chosen on all nine first-learner sweeps) and
    the hindsight n."""
    want, got = COMMITTED["second_learner"], committed_doc["second_learner"]
    assert want["sweeps"] == got["sweeps"] == [SECOND]
    assert set(got["summary"]) - LOSO_ONLY <= set(want["summary"]) and len(set(got["summary"]) - LOSO_ONLY) >= 20
    for method in sorted(set(got["summary"]) - LOSO_ONLY):
        assert_same_json(want["summary"][method], got["summary"][method], method, rel=1e-9, abs=1e-12)
    assert_same_json(want["hindsight"], got["hindsight"], "hindsight", rel=1e-9, abs=1e-12)


@pytest.mark.cpu_sensitive
def test_the_committed_simfit_bar_is_its_summaries(committed_doc):
    """plane.json's ``simfit`` block: the frozen method's second-learner entry rebuilt from the
    records, and every entry of every block recomputed from that block's summary."""
    from plane_helpers import assert_simfit_bar_follows

    bar = COMMITTED["simfit"]
    assert bar["frozen_at"] == lrr.frozen()["commit"]
    assert_same_json(bar["blocks"]["second_learner"][lrr.FROZEN], committed_doc["simfit"]["blocks"]["second_learner"][lrr.FROZEN],
                     "simfit/second_learner", rel=1e-9, abs=1e-12)
    assert_simfit_bar_follows(COMMITTED)


def test_the_constant_lr_sweep_is_a_block_of_its_own(docs):
    """Finished, the constant-lr sweep is scored in ``constant_lr`` alone: the first learner's blocks
    and the second learner's sqrt-rule block do not move; the lr-aware calibration is the frozen one
    pick for pick at the sqrt rule and reads the constant rule where the runs were made at it."""
    fin, doc = docs["finished"], docs["const"]
    assert doc["not_scored_yet"] == {} and sorted(doc["sweeps"]) == sorted(FIRST + [SECOND, CONST])
    block, sw = doc["constant_lr"], doc["sweeps"][CONST]
    assert block["sweeps"] == [CONST] and block["summary"] == sw["summary"]
    assert fin["constant_lr"] == {} and doc["second_learner"] == fin["second_learner"]
    for key in ("overall", "held_out", "all_sweeps", "hindsight", "dominance", "prospective"):
        assert doc[key] == fin[key], key
    for name in FIRST + [SECOND]:
        assert doc["sweeps"][name] == fin["sweeps"][name], name
    replays = 2 * len(sw["budgets"])
    for m in ("fixed n = 8", "profile-only", "cheap leader @0.05", lrr.FROZEN, pm.SIMFIT_LR):
        assert block["summary"][m]["replays"] == replays, m
    assert doc["loso"]["reader_choice"][CONST]["trained_on"] == FIRST and CONST not in doc["loso"]["isosim_predict_choice"]
    bars = doc["simfit"]["blocks"]
    assert set(bars["constant_lr"]) == {lrr.FROZEN, pm.SIMFIT_LR} and pm.SIMFIT_LR in bars["second_learner"]
    assert docs["cheap"]["simfit"]["blocks"]["constant_lr"] == {}
    # under the sqrt rule the lr-aware calibration is the frozen one; at one lr for every n it is not
    for name in FIRST + [SECOND]:
        s = doc["sweeps"][name]["summary"]
        assert s[pm.SIMFIT_LR] == s[lrr.FROZEN], name
    c = block["summary"]
    assert c[pm.SIMFIT_LR] != c[lrr.FROZEN]
