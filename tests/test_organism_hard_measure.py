"""The second learner's read-out (``studies/organism/organism_hard_measure.py``): n*(C) with tie
bands, the slope of log2 n* against log10 C with its seed bootstrap, and every committed
prediction's regret, on synthetic sweeps with a known answer and on the committed long sweeps."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import math
import subprocess
from pathlib import Path

import numpy as np
import pytest

from isosim.errors import IsosimError
from isosim.validation import crossing

from git_helpers import history_missing  # tests/git_helpers.py
from json_helpers import assert_same_json  # tests/json_helpers.py

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("organism_hard_measure", ROOT / "studies/organism/organism_hard_measure.py")
hm = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(hm)

BUDGETS = (1e4, 3e4, 1e5, 3e5, 1e6)
GRID = (2, 4, 8, 16, 32, 64)
EPS = 0.001  # seed 0 sits EPS above the seed mean, seed 1 EPS below: the seed se is EPS


def _write(folder: Path, values, top: float = 1e6, budget: float = 1e6) -> Path:
    """A sweep of nN_bp16_sS runs; ``values(n, i)`` is the seed mean at BUDGETS[i]; each run's
    records stop at ``top`` rollouts."""
    for n in GRID:
        for seed, sign in ((0, 1), (1, -1)):
            run = folder / f"n{n}_bp16_s{seed}"
            run.mkdir(parents=True)
            rows = [(0.0, -1.0)] + [(b, values(n, i) + sign * EPS) for i, b in enumerate(BUDGETS) if b <= top]
            (run / "records.jsonl").write_text("".join(
                json.dumps({"run_id": run.name, "n": n, "b_p": 16, "seed": seed, "rollouts": r, "val_avg": v,
                            "budget": budget}) + "\n" for r, v in rows))
    return folder


def _rising(n: int, i: int) -> float:
    """Rises with the budget for every n (so both readings agree); the best n at BUDGETS[i] is 2^(i+1)."""
    return i - 0.1 * abs(math.log2(n) - (i + 1))


def _expected_rising_slope() -> float:
    x = [math.log10(b) for b in BUDGETS]
    y = [1, 2, 3, 4, 5]
    mx, my = sum(x) / 5, sum(y) / 5
    return sum((a - mx) * (b - my) for a, b in zip(x, y)) / sum((a - mx) ** 2 for a in x)


def test_rising_n_star_gives_the_least_squares_slope(tmp_path):
    doc = hm.build(_write(tmp_path / "runs", _rising), manifest=None, n_boot=500)
    want = _expected_rising_slope()
    assert want == pytest.approx(1.9995, abs=1e-3)  # two octaves a decade (log10 3 is not quite 1/2)
    assert not doc["partial"] and doc["budgets"] == list(BUDGETS)
    for reading in ("best", "final"):
        m = doc["readings"][reading]
        assert [t["n_star"] for t in m["n_star"]] == [2, 4, 8, 16, 32]
        assert all(t["tie_band"] == [t["n_star"]] for t in m["n_star"])  # 0.1 apart, se 0.001
        assert all(t["seed_se"] == pytest.approx(EPS) for t in m["n_star"])
        s = m["slope"]
        assert s["point"] == pytest.approx(want, rel=1e-12) and s["n_star"] == [2, 4, 8, 16, 32]
        # the seed noise never flips a pick: every resample gives the point
        assert s["interval"] == pytest.approx([want, want], rel=1e-12) and s["share_above_zero"] == 1.0
        assert s["resamples"] == 500 and s["seeds_per_n"] == {str(n): 2 for n in GRID}
        assert [c["n_star"] for c in m["crossings"]] == [4, 8, 16, 32]
        assert all(BUDGETS[i] < c["budget"] <= BUDGETS[i + 1] for i, c in enumerate(m["crossings"]))


def test_flat_n_star_gives_slope_zero(tmp_path):
    doc = hm.build(_write(tmp_path / "runs", lambda n, i: i - 0.1 * abs(math.log2(n) - 3)), manifest=None, n_boot=200)
    for m in doc["readings"].values():
        assert [t["n_star"] for t in m["n_star"]] == [8] * 5 and m["crossings"] == []
        assert m["slope"]["point"] == 0.0 and m["slope"]["interval"] == [0.0, 0.0] and m["slope"]["share_zero"] == 1.0


def test_bootstrap_resamples_each_n_s_seeds_and_is_seeded():
    # at the top budget n = 4's seeds are 0.50 and 0.60 (mean 0.55), n = 2's 0.54 twice: the point
    # is n* = 4 there (slope > 0); a resample drawing n = 4's first seed twice makes it 2 (slope 0)
    runs = {2: {0: [(1e4, 0.30), (1e6, 0.54)], 1: [(1e4, 0.30), (1e6, 0.54)]},
            4: {0: [(1e4, 0.20), (1e6, 0.50)], 1: [(1e4, 0.20), (1e6, 0.60)]}}
    a = crossing.slope(runs, [1e4, 1e6], "final", 2000, np.random.default_rng(7))
    b = crossing.slope(runs, [1e4, 1e6], "final", 2000, np.random.default_rng(7))
    assert a == b
    assert a["point"] == pytest.approx(0.5) and a["n_star"] == [2, 4]
    assert a["interval"] == [0.0, 0.5]
    # n = 4's mean falls below 0.54 only when its first seed is drawn twice: one resample in four
    assert a["share_zero"] == pytest.approx(0.25, abs=0.03) and a["share_above_zero"] == pytest.approx(0.75, abs=0.03)
    with pytest.raises(IsosimError):
        crossing.slope(runs, [1e6], "final", 100, np.random.default_rng(0))


def test_refuses_short_runs_unless_partial(tmp_path, capsys):
    folder = _write(tmp_path / "runs", _rising, top=1e5)
    with pytest.raises(IsosimError, match="short of 1e\\+06"):
        hm.build(folder, manifest=None)
    assert hm.main(["--runs", str(folder), "--manifest", "none", "--out", str(tmp_path / "m.json")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: 12 run(s) short of 1e+06") and err.count("\n") == 1
    assert not (tmp_path / "m.json").exists()
    # --partial only to a path of one's own, never the committed one
    assert hm.main(["--runs", str(folder), "--manifest", "none", "--partial"]) == 2
    assert hm.main(["--runs", str(folder), "--manifest", "none", "--partial", "--out", str(hm.COMMITTED)]) == 2
    assert "never studies/results/organism_hard/measured.json" in capsys.readouterr().err
    out = tmp_path / "partial.json"
    assert hm.main(["--runs", str(folder), "--manifest", "none", "--partial", "--out", str(out), "--n-boot", "200"]) == 0
    doc = json.loads(out.read_text())
    assert doc["partial"] is True and doc["partial_note"].startswith("PARTIAL")
    assert doc["budgets"] == [1e4, 3e4, 1e5] and doc["budgets_left_out"] == [3e5, 1e6]
    assert [t["n_star"] for t in doc["readings"]["best"]["n_star"]] == [2, 4, 8]
    assert "PARTIAL" in capsys.readouterr().out


def _manifest(tmp_path: Path, entries: dict) -> Path:
    preds = []
    for name, (reads, entry) in entries.items():
        (tmp_path / name).write_text(json.dumps({"sweep-x": entry}))
        sha = hashlib.sha256(json.dumps(entry, sort_keys=True, separators=(",", ":")).encode()).hexdigest()
        preds.append({"file": name, "key": "sweep-x", "reads": reads, "entry_sha256": sha, "prospective": True})
    path = tmp_path / "manifest.json"
    path.write_text(json.dumps({"sweeps": {"sweep-x": {"predictions": preds}}}))
    return path


def test_every_prediction_is_scored_at_its_budget_and_reading(tmp_path):
    budgets = [1e5, 3e5, 1e6]  # the true n*: 8, 16, 32 in both readings
    profile = {"budgets": [1e4, 1e5, 1e6], "n_star": [2, 4, 64],
               "readings": {r: [{"budget": b, "n_star": n} for b, n in zip(budgets, (8, 2, 64))] for r in ("best", "final")},
               "fixed_n": {"n": 8, "budgets": budgets}}
    cheap = {"method": "cheap readers", "share": 0.05, "budgets": budgets,
             "picks": {"cheap leader (level)": {"best": [8, 16, 32], "final": [4, 16, 32]}}}
    simfit = {"method": "simfit x", "budgets": budgets, "picks": {r: {"seed 0": [8, 8, 8], "seed 1": [16, 16, 16]}
                                                                  for r in ("best", "final")}}
    man = _manifest(tmp_path, {"p.json": ("profile only", profile), "c.json": ("cheap readers", cheap),
                               "s.json": ("simfit", simfit)})
    doc = hm.build(_write(tmp_path / "runs", _rising), manifest=man, sweep="sweep-x", n_boot=100, root=tmp_path)
    pred = doc["predictions"]
    assert pred["not_reached"] == []
    got = {(s["label"], s["reading"], s["budget"]): s for s in pred["scored"]}
    assert len(got) == len(pred["scored"]) == 2 * 3 * (3 + 1 + 2)

    def regret(pick, best):  # _rising: 0.1 per octave from the best n
        return 0.1 * abs(math.log2(pick) - math.log2(best))

    for (label, reading, budget), s in got.items():
        best = {1e5: 8, 3e5: 16, 1e6: 32}[budget]
        assert s["best_n"] == best and s["tie_band"] == [best]
        assert s["regret"] == pytest.approx(regret(s["pick"], best), abs=1e-9)
        assert s["regret_in_se"] == pytest.approx(regret(s["pick"], best) / EPS, rel=1e-6)
        assert s["in_tie_band"] == (s["pick"] == best) == s["within_2se"]
    assert got[("profile-only (simulated sweep's n*)", "best", 3e5)]["pick"] == 2
    assert got[("profile-only (frontier n*)", "final", 1e6)]["pick"] == 64  # the frontier grid's nearest budget
    assert got[("profile-only (frontier n*)", "best", 3e5)]["pick"] == 4
    assert got[("cheap leader (level) @0.05", "final", 1e5)]["pick"] == 4
    assert got[("simfit x (seed 1)", "best", 1e6)]["regret"] == pytest.approx(0.1)
    summ = pred["summary"]["fixed n = 8"]["best"]
    assert summ["mean_regret"] == pytest.approx((0 + 0.1 + 0.2) / 3) and summ["in_tie_band"] == 1
    # an entry edited after the manifest recorded it is refused
    (tmp_path / "c.json").write_text(json.dumps({"sweep-x": {**cheap, "share": 0.1}}))
    with pytest.raises(IsosimError, match="hash differs"):
        hm.committed_predictions(man, "sweep-x", tmp_path)


def test_predictions_past_the_runs_are_listed_not_scored(tmp_path):
    cheap = {"method": "cheap readers", "share": 0.05, "budgets": [3e4, 1e6],
             "picks": {"lead": {"best": [4, 32], "final": [4, 32]}}}
    man = _manifest(tmp_path, {"c.json": ("cheap readers", cheap)})
    doc = hm.build(_write(tmp_path / "runs", _rising, top=1e5), partial=True, manifest=man, sweep="sweep-x",
                   n_boot=100, root=tmp_path)
    pred = doc["predictions"]
    assert [(s["budget"], s["regret"]) for s in pred["scored"]] == [(3e4, 0.0), (3e4, 0.0)]
    assert [p["budget"] for p in pred["not_reached"]] == [1e6, 1e6]
    with pytest.raises(IsosimError, match="reads 'isosim predict'"):
        hm.picks_of({}, "isosim predict")


def git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=True).stdout.strip()


def first_commit_holding(file: str, key: str, sha256: str) -> str:
    """The first commit whose ``file[key]`` is the entry of that hash."""
    for commit in git("log", "--reverse", "--format=%H", "--", file).split():
        try:
            entry = json.loads(git("show", f"{commit}:{file}")).get(key)
        except (subprocess.CalledProcessError, ValueError):
            continue
        if entry is not None and hashlib.sha256(json.dumps(entry, sort_keys=True, separators=(",", ":")).encode()
                                                ).hexdigest() == sha256:
            return commit
    raise AssertionError(f"no commit holds {file} [{key}] with hash {sha256[:12]}")


def first_commit_past(runs: str, budget: float) -> str:
    """The first commit that holds a record of ``runs`` a prediction reading up to ``budget`` rollouts
    could not have read: a run's record past ``budget`` other than its first one past it (a run pauses
    at the first step past its cheap budget)."""
    for commit in git("log", "--reverse", "--format=%H", "--", runs).split():
        for path in git("ls-tree", "-r", "--name-only", commit, "--", runs).split():
            if path.endswith("records.jsonl"):
                rollouts = [json.loads(x)["rollouts"] for x in git("show", f"{commit}:{path}").splitlines() if x.strip()]
                if sum(r > budget for r in rollouts) > 1:
                    return commit
    raise AssertionError(f"no commit holds a record of {runs} past {budget:g}")


def committed_before(a: str, b: str) -> bool:
    """``a`` is a strict ancestor of ``b`` and its commit date is earlier."""
    ancestor = subprocess.run(["git", "merge-base", "--is-ancestor", a, b], cwd=ROOT).returncode == 0
    return a != b and ancestor and int(git("show", "-s", "--format=%ct", a)) < int(git("show", "-s", "--format=%ct", b))


def test_the_committed_predictions_are_read_whole():
    """Every entry the second learner's manifest lists, checked against its hash: 3 budgets x 2
    readings for the profile-only prediction (simulated and frontier n*), fixed n = 8, the two cheap
    readers and the simfit method's two seeds."""
    picks = hm.committed_predictions(hm.MANIFEST, hm.SWEEP)
    labels = sorted({p["label"] for p in picks})
    assert len(picks) == 6 * len(labels) and len(labels) == 7, labels
    assert {p["budget"] for p in picks} == {1e5, 3e5, 1e6}
    assert {p["pick"] for p in picks} <= set(2 ** k for k in range(1, 9))
    assert {p["reads"] for p in picks} == {"profile only", "cheap readers", "simfit"}


READ_OUT = [k for k, v in hm.SWEEPS.items() if v["out"].is_file()]
"""the sweeps whose read-out (records to 1e6) is committed"""


@pytest.mark.parametrize("key", READ_OUT)
def test_every_committed_prediction_came_before_the_records_it_did_not_read(key):
    """Recomputed from the git history, not read from the manifest's ``prospective`` flag: each
    prediction entry's first commit (found by its hash) comes before, in ancestry and in date, the
    first commit holding a record of the sweep past what it read (profile-only: any record past step
    0's first update; the cheap readers and simfit: past the cheap part at 5e4 rollouts). The
    manifest's flag, and the read-out's, say the same."""
    why = history_missing()
    if why:
        pytest.skip(f"commit order not checked: {why}")
    preset = hm.SWEEPS[key]
    sweep = json.loads(preset["manifest"].read_text())["sweeps"][key]
    files = {p["file"].rsplit("/", 1)[-1] for p in sweep["predictions"]}
    # the one-lr-for-n = 8 sweep has no profile-only prediction (its two files: the cheap readers and lr-read)
    assert files == ({"prediction_cheap.json", "prediction_lr.json"} if key == "organism-hard-256-const8" else
                     {"prediction.json", "prediction_cheap.json", "prediction_simfit.json" if key == hm.SWEEP
                      else "prediction_simfit_lr.json"}), files
    for p in sweep["predictions"]:
        made = first_commit_holding(p["file"], p["key"], p["entry_sha256"])
        assert made == p["prediction_commit"]["commit"], p["file"]
        recomputed = committed_before(made, first_commit_past(sweep["runs"], p["cheap_budget"]))
        assert recomputed is True, f"{p['file']} was committed after a record it did not read"
        assert p["prospective"] is recomputed
    assert all(x["prospective"] is True for x in hm.committed_predictions(preset["manifest"], key))


def least_squares_slope(budgets: list[float], n_star: list[int]) -> float:
    """The least-squares slope of log2 n* against log10 C, worked out here."""
    x, y = np.log10(budgets), np.log2(n_star)
    return float(((x - x.mean()) * (y - y.mean())).sum() / ((x - x.mean()) ** 2).sum())


def test_long_sweep_read_out_matches_its_committed_tables():
    """On a committed long sweep of the first learner (complete to 2e6), n* and its tie band at the
    budgets of ``organism_long/measured.json`` are that file's."""
    committed = json.loads((ROOT / "studies/results/organism_long/measured.json").read_text())["hard-512-long"]
    at = [t["budget"] for t in committed["readings"]["best"]["n_star"]]
    doc = hm.build(ROOT / "studies/results/organism_long/hard-512-long", at, manifest=None, n_boot=200)
    for reading in ("best", "final"):
        want = [(t["n_star"], t["tie_band"]) for t in committed["readings"][reading]["n_star"]]
        assert [(t["n_star"], t["tie_band"]) for t in doc["readings"][reading]["n_star"]] == want
        s = doc["readings"][reading]["slope"]
        assert s["n_star"] == [w[0] for w in want]
        assert s["point"] == pytest.approx(least_squares_slope(at, s["n_star"]), rel=1e-12, abs=1e-12)
        assert s["interval"][0] <= s["point"] + 1e-12 and s["point"] <= s["interval"][1] + 1e-12
    # hard-512-long (its measured.json): n* 8 at 2e5..2e6 in the best reading, 8, 8, 8, 32 in the final
    best, final = (doc["readings"][r]["slope"]["point"] for r in ("best", "final"))
    assert best == 0.0 and final == pytest.approx(least_squares_slope([2e5, 5e5, 1e6, 2e6], [8, 8, 8, 32]), rel=1e-12)
    assert final == pytest.approx(1.7375, abs=1e-4)


@pytest.mark.parametrize("key", READ_OUT)
def test_the_committed_read_out_is_the_records(key):
    """measured.json, rebuilt from the committed records and manifest (the same bootstrap: 4,000
    resamples, seed 0): every n*, tie band, crossing, slope and prediction score, and, for the
    constant-lr sweep, the rule table and the lr-aware method's bar."""
    preset = hm.SWEEPS[key]
    committed = json.loads(preset["out"].read_text())
    doc = json.loads(json.dumps(hm.build(preset["runs"], manifest=preset["manifest"], sweep=key, against=preset["against"])))
    assert not doc["partial"] and committed["sweep"] == key
    if key == hm.SWEEP:
        assert committed["readings"]["best"]["slope"]["n_star"] == [32] * 5
    for part in ("readings", "predictions", "budgets", "n_values", "seeds", "b_p", "rules", "bar", "lr_read_bar"):
        assert (part in committed) == (part in doc), part
        if part in doc:
            assert_same_json(committed[part], doc[part], part, rel=1e-9, abs=1e-12)
    if preset["against"] is not None:
        assert set(doc["rules"]["runs"]) == {"sqrt", "constant"} and doc["rules"]["budgets"] == list(hm.TABLE_BUDGETS)
        assert doc["bar"]["rows"] and {r["budget"] for r in doc["bar"]["rows"]} == set(hm.TABLE_BUDGETS)


def _flat_at_32(n: int, i: int) -> float:
    """n = 32 best at every budget; each octave from it costs 0.1 (n = 8 is 0.2 behind, 200 se)."""
    return i - 0.1 * abs(math.log2(n) - 5)


def _rule(folder: Path, rule: str) -> Path:
    for run in folder.glob("n*_bp*_s*"):
        (run / "config.json").write_text(json.dumps({"n": int(run.name[1:].split("_")[0]), "lr": 3e-4, "lr_rule": rule}))
    return folder


def test_the_rule_table_and_the_bar_of_the_lr_aware_method(tmp_path, capsys):
    """The constant-lr read-out: each n's value under both rules at 1e5 / 3e5 / 1e6 with n = 8's
    regret under each, and the lr-aware method's bar (its mean regret over the seeds' picks against
    n = 8's and the cheap leader's, the goal of 2 se over n = 8 where n = 8 is behind) worked out by
    hand on synthetic sweeps."""
    const = _rule(_write(tmp_path / "const", _flat_at_32), "constant")
    sqrt = _rule(_write(tmp_path / "sqrt", _rising), "sqrt")
    budgets = [1e5, 3e5, 1e6]
    profile = {"budgets": budgets, "n_star": [8, 8, 8], "fixed_n": {"n": 8, "budgets": budgets},
               "readings": {r: [{"budget": b, "n_star": 8} for b in budgets] for r in ("best", "final")}}
    cheap = {"method": "cheap readers", "share": 0.05, "budgets": budgets,
             "picks": {"cheap leader (level)": {r: [32, 16, 32] for r in ("best", "final")}}}
    lr = {"method": "simfit lr-aware x", "budgets": budgets,
          "picks": {r: {"seed 0": [32, 32, 64], "seed 1": [16, 32, 32]} for r in ("best", "final")},
          "pooled_seeds_picks": {r: [32, 32, 64] for r in ("best", "final")}}
    man = _manifest(tmp_path, {"p.json": ("profile only", profile), "c.json": ("cheap readers", cheap),
                               "s.json": ("simfit", lr)})
    doc = hm.build(const, manifest=man, sweep="sweep-x", n_boot=100, root=tmp_path, against=sqrt)
    # the rule table: the constant rule first, then the sqrt rule, at each budget
    rules = doc["rules"]
    assert rules["rules"] == ["sqrt", "constant"] or rules["rules"] == ["constant", "sqrt"]
    rows = {(r["budget"], r["rule"]): r for r in rules["best"]}
    assert set(rows) == {(b, rule) for b in budgets for rule in ("sqrt", "constant")}
    for i, b in enumerate(budgets, start=2):
        c, s = rows[(b, "constant")], rows[(b, "sqrt")]
        assert c["best"] == 32 and s["best"] == 2 ** (i + 1)
        assert c["mean"]["8"] == pytest.approx(_flat_at_32(8, i)) and s["mean"]["64"] == pytest.approx(_rising(64, i))
        assert c["fixed_regret"] == pytest.approx(0.2) and c["fixed_regret_in_se"] == pytest.approx(200, rel=1e-6)
        assert s["fixed_regret"] == pytest.approx(0.1 * abs(3 - (i + 1)), abs=1e-12)
        assert c["fixed_within_2se"] is False and (s["fixed_within_2se"] is True) == (i == 2)
    table = hm.markdown_table(rules, "best").splitlines()
    assert len(table) == 2 + len(GRID) + 1 and table[0].count("|") == 2 + 6
    assert "**" in table[2 + GRID.index(32)] and table[-1].startswith("| n = 8's regret (se) | ")
    # the bar, by hand: mean over the seeds' picks, against n = 8 (0.2 behind) and the cheap leader
    bar = {(r["reading"], r["budget"]): r for r in doc["bar"]["rows"]}
    want = {1e5: (0.05, 0.0), 3e5: (0.0, 0.1), 1e6: (0.05, 0.0)}  # (lr-aware, cheap leader)
    for (reading, b), r in bar.items():
        assert r["method"]["regret"] == pytest.approx(want[b][0]) and r["cheap leader (level) @0.05"]["regret"] == pytest.approx(want[b][1])
        assert r["fixed n = 8"]["regret"] == pytest.approx(0.2) and r["fixed_more_than_2se_behind"] is True
        assert r["meets"] is (want[b][0] <= want[b][1]) and r["goal"] is True
        assert r["gain_over_fixed_in_se"] == pytest.approx((0.2 - want[b][0]) / EPS, rel=1e-6)
        assert r["method"]["overhead"] == 0.05 and r["method"]["pooled"]["pick"] == {1e5: 32, 3e5: 32, 1e6: 64}[b]
    assert len(bar) == 6 and doc["bar"]["meets_everywhere"] is False and doc["bar"]["goal_everywhere"] is True
    # the same rule on both sides, or a folder that mixes rules, is one clear error
    with pytest.raises(IsosimError, match="same lr rule"):
        hm.build(const, manifest=None, n_boot=100, against=const)
    (sqrt / "n2_bp16_s0" / "config.json").write_text(json.dumps({"lr_rule": "constant"}))
    with pytest.raises(IsosimError, match="not one"):
        hm.build(const, manifest=None, n_boot=100, against=sqrt)
    # --partial never writes under studies/results, whatever the name
    assert hm.main(["--sweep", "organism-hard-128-const", "--partial", "--out", str(hm.STUDIES / "x.json")]) == 2
    assert "never studies/results/organism_hard_const/measured.json" in capsys.readouterr().err
    assert not (hm.STUDIES / "x.json").exists()


def test_each_sweep_names_its_runs_manifest_and_read_out():
    for key, preset in hm.SWEEPS.items():
        assert preset["runs"].is_dir() and preset["manifest"].is_file(), key
        assert key in json.loads(preset["manifest"].read_text())["sweeps"], key
        assert preset["out"].parent == preset["manifest"].parent
    assert hm.SWEEPS["organism-hard-128-const"]["against"] == hm.SWEEPS[hm.SWEEP]["runs"]
    entry = json.loads((hm.CONST / "prediction_simfit_lr.json").read_text())["organism-hard-128-const"]
    assert {int(n): s for n, s in entry["cheap_runs"].items()} == hm.LR_AWARE_CHEAP  # the bar's overhead
    assert hm.lr_rule_of(hm.SWEEPS[hm.SWEEP]["runs"]) == "sqrt"
    assert hm.lr_rule_of(hm.SWEEPS["organism-hard-128-const"]["runs"]) == "constant"


def test_the_lr_read_bar_scores_each_form_pooled_and_per_seed_against_n_8_and_the_difference_se(tmp_path):
    """An lr-read entry (per form: each seed's picks and both seeds pooled) on a sweep whose best n is
    8, 16, 32 at 1e5, 3e5, 1e6: a form that picks the best meets the bar; one that keeps n = 8 ties
    n = 8 but is within 1 se of the difference only where 8 is best; one that picks past the best at
    1e5 does worse than n = 8 there."""
    budgets = [1e5, 3e5, 1e6]
    right, eight, late = [8, 16, 32], [8, 8, 8], [16, 16, 32]
    entry = {"method": "lr-read", "budgets": budgets, "share": 0.05,
             "picks": {"lr-read one n": {r: {"seed 0": eight, "seed 1": eight} for r in ("best", "final")},
                       "lr-read every n": {r: {"seed 0": right, "seed 1": late} for r in ("best", "final")},
                       "07a27e7": {r: {"seed 0": late, "seed 1": late} for r in ("best", "final")},
                       "cheap leader @5%": {r: {"seed 0": right, "seed 1": right} for r in ("best", "final")}},
             "pooled_seeds_picks": {"lr-read one n": {r: eight for r in ("best", "final")},
                                    "lr-read every n": {r: right for r in ("best", "final")},
                                    "07a27e7": {r: late for r in ("best", "final")},
                                    "cheap leader @5%": {r: right for r in ("best", "final")}}}
    man = _manifest(tmp_path, {"l.json": ("lr-read", entry)})
    doc = hm.build(_write(tmp_path / "runs", _rising), manifest=man, sweep="sweep-x", n_boot=100, root=tmp_path)
    assert len(doc["predictions"]["scored"]) == 4 * 2 * 3 * 3  # forms x readings x budgets x (two seeds, pooled)
    bar = doc["lr_read_bar"]
    s = bar["summary"]
    assert s["lr-read every n"]["pooled"] == {"cells": 6, "no_higher_than_fixed": 6, "within_1se": 6,
                                             "mean_regret": pytest.approx(0.0, abs=1e-9), "meets": True}
    # per seed: seed 1 picks 16 at 1e5 (0.1 behind, where n = 8 is best), so the seed mean trails n = 8 there
    assert s["lr-read every n"]["seeds"]["no_higher_than_fixed"] == 4 and not s["lr-read every n"]["seeds"]["meets"]
    assert s["lr-read one n"]["pooled"]["no_higher_than_fixed"] == 6 and s["lr-read one n"]["pooled"]["within_1se"] == 2
    assert not s["lr-read one n"]["pooled"]["meets"]
    assert s["07a27e7"]["pooled"]["no_higher_than_fixed"] == 4 and s["07a27e7"]["pooled"]["within_1se"] == 4
    assert s["cheap leader @5%"]["seeds"]["meets"]
    cell = next(c for c in bar["rows"] if c["form"] == "lr-read one n" and c["version"] == "pooled"
                and c["reading"] == "best" and c["budget"] == 1e6)
    # 0.2 behind (two octaves from 32); two seeds a side, seed sd EPS sqrt 2: the difference's se is sqrt 2 EPS
    assert cell["regret"] == pytest.approx(0.2, abs=1e-9)
    assert cell["difference_se"] == pytest.approx(math.sqrt(2) * EPS, rel=1e-6)
    assert cell["regret_in_difference_se"] == pytest.approx(0.2 / (math.sqrt(2) * EPS), rel=1e-6)
    assert cell["n = 8 regret"] == pytest.approx(0.2, abs=1e-9) and cell["no_higher_than_fixed"] and not cell["within_1se"]


def test_the_one_lr_for_n_8_sweeps_predictions_are_read_whole_and_wait_for_its_records(tmp_path):
    """Its manifest's entries (the cheap readers; the lr-read forms, 07a27e7 and the cheap leader per
    seed and pooled), each checked against its hash; on its cheap part (every run cut at 5e4, what was
    committed before the predictions) every pick is at a budget not reached yet."""
    key = "organism-hard-256-const8"
    preset = hm.SWEEPS[key]
    picks = hm.committed_predictions(preset["manifest"], key)
    lr = [p for p in picks if p["reads"] == "lr-read"]
    assert len(lr) == 4 * 2 * 3 * 3 and {p["budget"] for p in picks} == {1e5, 3e5, 1e6}
    assert {p["label"].split(" (")[0] for p in lr} == set(hm.LR_READ_FORMS + hm.LR_READ_BESIDE)
    cut = tmp_path / "hard-256"
    for run in sorted(preset["runs"].glob("n*_bp*_s*")):
        (cut / run.name).mkdir(parents=True)
        (cut / run.name / "config.json").write_bytes((run / "config.json").read_bytes())
        (cut / run.name / "records.jsonl").write_text("".join(
            line + "\n" for line in (run / "records.jsonl").read_text().splitlines()
            if line.strip() and json.loads(line)["rollouts"] <= 5e4))
    doc = hm.build(cut, budgets=(1e4, 3e4, 1e5), partial=True, manifest=preset["manifest"], sweep=key,
                   n_boot=100)
    assert doc["partial"] and doc["budgets"] == [1e4, 3e4]
    assert doc["predictions"]["scored"] == [] and len(doc["predictions"]["not_reached"]) == len(picks)
    assert "lr_read_bar" not in doc
