"""The committed organism predictions against their manifests (``scripts/prediction_manifest.py``):
each prediction is the file it names, read only the cheap part it names, and was committed before
its sweep's full records when it is called prospective (after them when a retrodiction).

- hashes: every prediction file, entry and dynamics fit, and the cheap records each prediction
  read (each run's records.jsonl lines up to the first past the cheap budget) match the manifest;
- ``isosim predict`` entries are recomputed from a copy of the sweep whose every line past the
  cheap budget is corrupted (the first one keeps only its ``rollouts``, which tells the reader to
  stop; the rest are not JSON) and must come out as committed;
- a dynamics fit (minutes to rerun) carries the real curves it was fitted to: their points must be
  exactly the cheap part's evaluations, at the cheap part's seed means;
- the history: a prospective prediction's first commit is an ancestor of its records' commit, a
  retrodiction's is not (skipped where the checkout has no git history or a shallow one).
"""

from __future__ import annotations

import importlib.util
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from isosim.errors import IsosimError
from git_helpers import history_missing
from test_published_numbers import mismatches

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("prediction_manifest", ROOT / "scripts" / "prediction_manifest.py")
pm = importlib.util.module_from_spec(spec)
spec.loader.exec_module(pm)

MANIFESTS = {path: json.loads((ROOT / path).read_text()) for path in pm.FAMILIES}
PREDICTIONS = [(path, sweep, p) for path, doc in MANIFESTS.items() for sweep, s in doc["sweeps"].items()
               for p in s["predictions"]]
PREDICT_RTOL = 1e-4
"""relative tolerance of a recomputed ``isosim predict`` entry: its curve fits stop within their
solver's tolerance, and where they stop moves with the last bits of numpy's exp and log, which
differ between CPU kinds; measured across ATEN_CPU_CAPABILITY=default, avx2 and avx512 with the
libraries capped alike (scripts/cpu_kinds.py, studies/LOG.md 2026-12-06): at most 7.4e-6 of a
number's size (hard's seed_sd under avx2; 1.5e-6 elsewhere), every integer, pick and list length
equal"""
RECOMPUTED_AWAY = {"/cheap/runs", "/cheap/runs_cut_at_limit", "/setting"}
"""fields of an ``isosim predict`` entry that a recomputation from today's records cannot repeat:
the folder it was given (hard-1238-t06 was then named hard-1238), how many runs had a record past
the limit then (the cheap part: 2; now every run), and the setting line passed with --setting"""


def _ids(item):
    path, sweep, p = item
    return f"{sweep}:{Path(p['file']).stem}"


def test_every_sweep_and_prediction_file_is_in_a_manifest():
    assert {s for doc in MANIFESTS.values() for s in doc["sweeps"]} == {
        "hard-128", "hard-512", "hard-1238-t06", "hard-256", "easy", "hard", "hard-128-long", "hard-512-long", "hard-1238-long",
        "organism-hard-128", "organism-hard-128-const", "organism-hard-256-const8"}
    # organism-hard-128-const: profile-only, cheap readers, the lr-aware method; organism-hard-256-const8: the
    # cheap readers, the lr-read model's forms with the 07a27e7 method and the cheap leader
    assert len(PREDICTIONS) == 29 + 3 + 2
    named = {p["file"] for _, _, p in PREDICTIONS}
    on_disk = {str(f.relative_to(ROOT)) for f in [*(ROOT / "studies/results/organism_f8").glob("prediction*.json"),
                                                  *(ROOT / "studies/results/organism_long").glob("prediction*.json"),
                                                  *(ROOT / "studies/results/organism_hard").glob("prediction*.json"),
                                                  *(ROOT / "studies/results/organism_hard_const").glob("prediction*.json"),
                                                  *(ROOT / "studies/results/organism_const8").glob("prediction*.json"),
                                                  *(ROOT / "studies/results").glob("organism_prediction*.json")]}
    assert named == on_disk


OTHER = [(path, o) for path, doc in MANIFESTS.items() for o in doc.get("other_predictions", [])]


def test_every_prediction_file_under_the_results_is_in_a_manifest():
    """Any committed prediction (a *prediction*.json anywhere under studies/results: frontier
    entries, the plane's picks, the allocation gains, ...) has its file hash and commit time recorded."""
    on_disk = {str(f.relative_to(ROOT)) for f in (ROOT / "studies/results").rglob("*prediction*.json")}
    listed = {f for doc in MANIFESTS.values() for f in doc["files"]}
    assert on_disk and on_disk <= listed, sorted(on_disk - listed)
    assert {o["file"] for _, o in OTHER} == {f for f in on_disk if f not in {p["file"] for _, _, p in PREDICTIONS}}
    assert "studies/results/plane_predictions_long.json" in {o["file"] for _, o in OTHER}


@pytest.mark.parametrize("item", OTHER, ids=lambda item: item[1]["label"])
def test_each_other_prediction_is_its_file_and_its_commit_order(item):
    path, o = item
    units = pm.OTHER[path][o["file"]]
    found = {label: (runs, core) for runs, label, core in units(json.loads((ROOT / o["file"]).read_text()))}
    runs, core = found[o["label"]]
    assert runs == o["runs"] and pm.entry_sha256(core) == o["entry_sha256"]
    why = history_missing()
    if why:
        pytest.skip(f"commit order not checked: {why}")
    assert pm.git("log", "-1", "--format=%H", "--", o["runs"]) == o["records_commit"]["commit"]
    for c in (o["prediction_commit"], o["records_commit"]):
        assert pm.commit_info(c["commit"]) == c
    made, records = o["prediction_commit"]["commit"], o["records_commit"]["commit"]
    assert pm.first_commit_of_unit(o["file"], units, o["label"], core) == made
    assert (made != records and pm.is_ancestor(made, records)) == o["prospective"]


def test_the_files_are_those_of_the_manifest():
    for path, doc in MANIFESTS.items():
        for f, sha in doc["files"].items():
            assert pm.sha256_bytes((ROOT / f).read_bytes()) == sha, f"{f} changed since {path} was written (python scripts/prediction_manifest.py rewrites it)"


@pytest.mark.parametrize("item", PREDICTIONS, ids=_ids)
def test_each_prediction_read_the_cheap_records_of_its_manifest(item):
    _, sweep, p = item
    entry = json.loads((ROOT / p["file"]).read_text())[p["key"]]
    assert pm.entry_sha256(entry) == p["entry_sha256"]
    r = pm.reads(entry)
    assert {k: p.get(k) for k in r} == r  # what it read, as the entry itself says
    folder = ROOT / MANIFESTS[item[0]]["sweeps"][sweep]["runs"]
    assert pm.cheap_records_sha256(folder, p["cheap_budget"], p["n_values"]) == p["cheap_records_sha256"]
    if p["cheap_budget"]:  # every run of the n it read is hashed
        runs = {rec.parent.name for rec in folder.glob("*/records.jsonl")
                if not p["n_values"] or json.loads((rec.parent / "config.json").read_text())["n"] in p["n_values"]}
        assert set(p["cheap_records_sha256"]) == runs and runs


def _corrupted_copy(folder: Path, dest: Path, budget: float) -> int:
    """A copy of the sweep whose lines past ``budget`` are corrupted; returns how many lines were."""
    shutil.copytree(folder, dest)
    bad = 0
    for rec in dest.glob("*/records.jsonl"):
        lines = rec.read_text().splitlines()
        keep = pm.cheap_lines(rec.read_text(), budget)
        rest = lines[len(keep):]
        if rest:
            first = json.loads(rest[0])
            rest = [json.dumps({k: (first[k] if k == "rollouts" else -1e9 if isinstance(first[k], (int, float)) else "x")
                                for k in first})] + ["corrupted past the cheap budget {"] * (len(rest) - 1)
            bad += len(rest)
        rec.write_text("".join(ln + "\n" for ln in keep + rest))
    return bad


@pytest.mark.cpu_sensitive
@pytest.mark.parametrize("item", [i for i in PREDICTIONS if i[2]["recompute"]], ids=_ids)
def test_isosim_predict_reads_nothing_past_its_cheap_budget(item, tmp_path):
    from isosim.predict import extrapolate
    from isosim.predict.dynamics import read_cheap_runs

    path, sweep, p = item
    rc = p["recompute"]
    copy = tmp_path / "runs"
    assert _corrupted_copy(ROOT / MANIFESTS[path]["sweeps"][sweep]["runs"], copy, p["cheap_budget"]) > 0
    with pytest.raises(IsosimError):  # the corruption is there for any reader that goes past the budget
        read_cheap_runs(copy, max_rollouts=rc["budget"])
    def predict(runs):
        return json.loads(json.dumps(extrapolate.predict_from_cheap(
            runs, max_rollouts=rc["max_rollouts"], budget=rc["budget"], method=rc["method"], n_boot=rc["n_boot"])))

    # The committed entry was made by the code of its commit (the manifest's prediction_commit), which
    # read the frontier uncapped; today's frontier caps each n's curve by what its runs measured, so
    # today's code gives other n* there. What the manifest's hashes and commit order cannot show, that
    # the prediction reads nothing past its cheap budget, is checked with today's code: the same
    # prediction from the corrupted copy as from the intact records, and on the committed budgets.
    fresh, intact = predict(copy), predict(ROOT / MANIFESTS[path]["sweeps"][sweep]["runs"])
    assert mismatches(intact, fresh, ignored=RECOMPUTED_AWAY, rtol=PREDICT_RTOL) == []
    committed = json.loads((ROOT / p["file"]).read_text())[p["key"]]
    assert fresh["budgets"] == pytest.approx(committed["budgets"], rel=1e-12)


@pytest.mark.parametrize("item", [i for i in PREDICTIONS if i[2]["reads"] == "dynamics fit"], ids=_ids)
def test_each_dynamics_fit_was_fitted_to_its_cheap_part_alone(item):
    path, sweep, p = item
    fit = json.loads((ROOT / p["fit"]).read_text())["fit"]
    assert float(fit["max_rollouts"]) == p["cheap_budget"]
    seen: dict[tuple[int, int], dict[float, list[float]]] = {}
    for rec in sorted((ROOT / MANIFESTS[path]["sweeps"][sweep]["runs"]).glob("*/records.jsonl")):
        for line in pm.cheap_lines(rec.read_text(), p["cheap_budget"]):
            r = json.loads(line)
            if p["n_values"] and r["n"] not in p["n_values"]:
                continue
            seen.setdefault((r["n"], r["b_p"]), {}).setdefault(float(r["rollouts"]), []).append(r["val_avg"])
    assert {f"n={n},b_p={b}" for n, b in seen} == set(fit["curves"])
    for (n, b), points in seen.items():
        curve = fit["curves"][f"n={n},b_p={b}"]
        assert curve["rollouts"] == sorted(x for x in points if x > 0), (n, "the fit's points are not the cheap part's")
        np.testing.assert_allclose(curve["real_val_avg"], [np.mean(points[x]) for x in curve["rollouts"]],
                                   rtol=0, atol=1e-12)


@pytest.mark.parametrize("item", PREDICTIONS, ids=_ids)
def test_prospective_predictions_were_committed_before_their_records(item):
    why = history_missing()
    if why:
        pytest.skip(f"commit order not checked: {why}")
    path, sweep, p = item
    records = MANIFESTS[path]["sweeps"][sweep]["records_commit"]
    last = pm.git("log", "-1", "--format=%H", "--", MANIFESTS[path]["sweeps"][sweep]["runs"])
    made = p["prediction_commit"]
    assert pm.commit_info(made["commit"]) == made
    entry = json.loads((ROOT / p["file"]).read_text())[p["key"]]
    assert pm.first_commit_with(p["file"], entry) == made["commit"]
    if records is None:  # predictions first: no record of the sweep is committed yet
        assert last == "" and p["prospective"] is None and p["cheap_budget"] == 0
        return
    assert last == records["commit"]
    assert pm.commit_info(records["commit"]) == records
    before = made["commit"] != records["commit"] and pm.is_ancestor(made["commit"], records["commit"])
    assert before == p["prospective"], (f"{p['file']} [{p['key']}] is called "
                                        f"{'prospective' if p['prospective'] else 'a retrodiction'} but was "
                                        f"committed {'before' if before else 'after'} its records")
    if not p["prospective"]:
        assert pm.is_ancestor(records["commit"], made["commit"])


@pytest.mark.parametrize("item", [i for i in PREDICTIONS if i[2]["reads"] == "cheap readers"], ids=_ids)
def test_cheap_readers_picks_follow_from_their_cheap_part(item):
    """Each budget's picks, recomputed from the committed cheap part cut at the entry's share of that
    budget (``llm_runs.organism.cheap_picks``), are the committed ones."""
    from llm_runs.organism import cheap_picks

    path, sweep, p = item
    committed = json.loads((ROOT / p["file"]).read_text())[p["key"]]
    fresh = cheap_picks.picks(ROOT / MANIFESTS[path]["sweeps"][sweep]["runs"], committed["budgets"], committed["share"])
    assert fresh["picks"] == committed["picks"] and fresh["tie_bands"] == committed["tie_bands"]
    for label, by in committed["detail"].items():
        for reading, answers in by.items():
            for got, want in zip(fresh["detail"][label][reading], answers):
                assert got["cheap_rollouts"] == want["cheap_rollouts"] and got["method"] == want["method"]
                for n, v in want["n"].items():
                    assert got["n"][n]["expected_regret"] == pytest.approx(v["expected_regret"], abs=1e-12), (label, n)


@pytest.mark.parametrize("item", [i for i in PREDICTIONS if i[2]["reads"] == "simfit"], ids=_ids)
def test_simfit_picks_follow_from_their_cheap_runs(item, tmp_path):
    """The frozen simfit method's entry, recomputed (``studies/scoring/simfit_organism_hard.py``, the
    committed bank) from a copy of the sweep whose lines past the cheap budget are corrupted and
    whose runs of other n hold a nonsense value at every evaluation (the script lists them, the n of the
    grid, and reads none of their values), is the committed one."""
    path, sweep, p = item
    script = "simfit_lr_const" if p["file"].endswith("prediction_simfit_lr.json") else "simfit_organism_hard"
    spec_ = importlib.util.spec_from_file_location(script, ROOT / f"studies/scoring/{script}.py")
    mod = importlib.util.module_from_spec(spec_)
    spec_.loader.exec_module(mod)
    copy = tmp_path / "runs"
    _corrupted_copy(ROOT / MANIFESTS[path]["sweeps"][sweep]["runs"], copy, p["cheap_budget"])
    for cfg in copy.glob("*/config.json"):
        if json.loads(cfg.read_text())["n"] not in p["n_values"]:
            rec = cfg.parent / "records.jsonl"
            rows = []
            for line in rec.read_text().splitlines():
                try:
                    rows.append(json.loads(line))
                except ValueError:  # corrupted past the cheap budget above
                    continue
            rec.write_text("".join(json.dumps({**r, "val_avg": -1e9 if r["val_avg"] is not None else None}) + "\n"
                                   for r in rows))
    committed = json.loads((ROOT / p["file"]).read_text())[p["key"]]
    if script == "simfit_lr_const":  # the lr-aware method reads its sweep from SWEEP (and checks the sqrt one first)
        mod.SWEEP = copy
        fresh = json.loads(json.dumps(mod.predict()))[p["key"]]
    else:
        fresh = json.loads(json.dumps(mod.predict(copy)))[p["key"]]
    assert fresh["picks"] == committed["picks"]
    assert fresh["n_values"] == committed["n_values"]
    assert mismatches(committed["replays"], fresh["replays"], ignored=set(), rtol=PREDICT_RTOL) == []
