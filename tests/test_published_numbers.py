"""Every published study number is recomputed from the committed records and must equal the
committed JSON, number for number.

Each reader runs as the docs tell a reader to run it, from the repository root, but writes into a
temporary folder; the fresh JSON is then compared with the committed one recursively: the same
keys, the same list lengths, equal strings, integers and booleans, floats within 1e-12 or 1e-9 of
their size (NaN equals NaN). The only fields left out are wall-clock times, listed in
:data:`IGNORED`. A committed number that no longer follows from the records (a hand edit, a reader
changed without rerunning it) fails here with the paths of the numbers that differ.

The floats' tolerance is the spread measured across CPU kinds (``scripts/cpu_kinds.py``, studies/LOG.md
2026-12-06): the fits behind the frontiers start from numpy's exp and log, whose AVX-512, AVX2 and
SSE loops differ in the last bit, and the fitted frontier readings then differ by up to 5.7e-11 of
their size (organism_long's, under ATEN_CPU_CAPABILITY=default); every integer, string, pick and
list length is the same under every kind.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.cpu_sensitive

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "studies" / "results"
F8 = "studies/results/organism_f8"
F8_SWEEPS = ("hard-1238-t06", "hard-128", "hard-256", "hard-512")

IGNORED = {"scoreboard": {"/wall_seconds"}}
"""fields left out of the comparison, per published file: wall-clock times only"""

TOL = 1e-12
RTOL = 1e-9
"""relative tolerance of the published numbers (measured spread across CPU kinds 5.7e-11)"""


def mismatches(committed, fresh, path: str = "", ignored: frozenset | set = frozenset(), rtol: float = 0.0) -> list[str]:
    """The paths where ``fresh`` differs from ``committed`` (recursively), as readable lines; floats
    agree within ``TOL`` or ``rtol`` of the larger's size."""
    if path in ignored:
        return []
    if isinstance(committed, dict) and isinstance(fresh, dict):
        out = [f"{path}/{k}: only in the committed file" for k in committed if k not in fresh and f"{path}/{k}" not in ignored]
        out += [f"{path}/{k}: only in the recomputed file" for k in fresh if k not in committed and f"{path}/{k}" not in ignored]
        for k in committed:
            if k in fresh:
                out += mismatches(committed[k], fresh[k], f"{path}/{k}", ignored, rtol)
        return out
    if isinstance(committed, list) and isinstance(fresh, list):
        if len(committed) != len(fresh):
            return [f"{path}: {len(committed)} items committed, {len(fresh)} recomputed"]
        return [m for i, (a, b) in enumerate(zip(committed, fresh)) for m in mismatches(a, b, f"{path}[{i}]", ignored, rtol)]
    if isinstance(committed, bool) or isinstance(fresh, bool) or not (
            isinstance(committed, (int, float)) and isinstance(fresh, (int, float))):
        return [] if committed == fresh and type(committed) is type(fresh) else [
            f"{path}: committed {committed!r}, recomputed {fresh!r}"]
    if isinstance(committed, int) and isinstance(fresh, int):
        return [] if committed == fresh else [f"{path}: committed {committed!r}, recomputed {fresh!r}"]
    a, b = float(committed), float(fresh)
    if (math.isnan(a) and math.isnan(b)) or a == b or abs(a - b) <= max(TOL, rtol * max(abs(a), abs(b))):
        return []
    return [f"{path}: committed {committed!r}, recomputed {fresh!r}"]


def assert_same(name: str, committed_path: Path, fresh_path: Path) -> None:
    committed = json.loads(committed_path.read_text())
    fresh = json.loads(fresh_path.read_text())
    bad = mismatches(committed, fresh, ignored=IGNORED.get(name, set()), rtol=RTOL)
    assert not bad, (f"{committed_path.relative_to(ROOT)} does not follow from the committed records "
                     f"({len(bad)} differences):\n" + "\n".join(bad[:25]))


def run(args: list[str], tmp_path: Path) -> None:
    env = {**os.environ, "ISOSIM_STUDY_OUT": str(tmp_path), "OMP_NUM_THREADS": "1",
           "PYTHONPATH": os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])}
    res = subprocess.run([sys.executable, *args], cwd=ROOT, capture_output=True, text=True, timeout=300, env=env)
    assert res.returncode == 0, res.stderr[-3000:]


def test_the_comparison_sees_a_changed_number():
    doc = {"a": [1, 2.5, {"b": True, "c": "x", "d": float("nan")}], "wall_seconds": 3.0}
    assert mismatches(doc, json.loads(json.dumps(doc))) == []
    assert mismatches(doc, {**doc, "a": [1, 2.5 + 1e-9, doc["a"][2]]}) == ["/a[1]: committed 2.5, recomputed 2.500000001"]
    assert mismatches(doc, {**doc, "a": [1, 2.5, {**doc["a"][2], "b": 1}]})  # True is not 1
    assert mismatches(doc, {**doc, "a": [1, 2.5]}) == ["/a: 3 items committed, 2 recomputed"]
    assert mismatches(doc, {"a": doc["a"]}) == ["/wall_seconds: only in the committed file"]
    assert mismatches(doc, {"a": doc["a"], "wall_seconds": 9.0}, ignored={"/wall_seconds"}) == []
    # the relative tolerance: 9782.756359950818 is 9782.75635995082 on another CPU kind (1 ulp, 2e-12)
    assert mismatches([9782.756359950818], [9782.75635995082]) and not mismatches([9782.756359950818], [9782.75635995082], rtol=RTOL)
    assert mismatches(doc, {**doc, "a": [1, 2.5 * (1 + 1e-8), doc["a"][2]]}, rtol=RTOL)  # a change past it
    assert mismatches({"x": 0.0}, {"x": 1e-11}, rtol=RTOL)  # near zero the absolute 1e-12 holds
    assert mismatches({"x": 2_000_000_000}, {"x": 2_000_000_001}, rtol=RTOL)  # integers exactly


def test_scoreboard_follows_from_the_records(tmp_path):
    # studies/scoring/scoreboard.py: every predictor's pick, regret and noise on every real sweep
    run(["studies/scoring/scoreboard.py"], tmp_path)
    assert_same("scoreboard", RESULTS / "scoreboard.json", tmp_path / "results" / "scoreboard.json")


def test_adaptive_replay_follows_from_the_records(tmp_path):
    # studies/scoring/adaptive_replay.py: every replay, reference reader and live search
    run(["studies/scoring/adaptive_replay.py"], tmp_path)
    assert_same("adaptive_replay", RESULTS / "adaptive_replay.json", tmp_path / "results" / "adaptive_replay.json")


def test_f8_measured_frontiers_follow_from_the_records(tmp_path):
    # the organism's F8 sweeps read on their prediction's budget grid (llm_runs.organism.f8 measure)
    runs = [a for s in F8_SWEEPS for a in ("--runs", f"{s}={F8}/{s}")]
    run(["-m", "llm_runs.organism.f8", "measure", *runs, "--prediction", f"{F8}/prediction.json",
         "--out", str(tmp_path / "measured.json")], tmp_path)
    assert sorted(json.loads((RESULTS / "organism_f8" / "measured.json").read_text())) == sorted(F8_SWEEPS)
    assert_same("organism_f8/measured", RESULTS / "organism_f8" / "measured.json", tmp_path / "measured.json")


LONG = "studies/results/organism_long"
LONG_READINGS = "2e5,5e5,1e6,2e6"


def test_long_measured_follow_from_the_records(tmp_path):
    # the long-budget sweeps: the F8 reading plus n* in both readings at 2e5..2e6, the crossing and
    # the cheap leader's regret (f8 measure --readings), for every sweep measured so far
    committed = json.loads((RESULTS / "organism_long" / "measured.json").read_text())
    assert committed and set(committed) <= {"hard-128-long", "hard-512-long", "hard-1238-long"}
    runs = [a for s in sorted(committed) for a in ("--runs", f"{s}={LONG}/{s}")]
    run(["-m", "llm_runs.organism.f8", "measure", *runs, "--prediction", f"{LONG}/prediction.json",
         "--readings", LONG_READINGS, "--out", str(tmp_path / "measured.json")], tmp_path)
    assert_same("organism_long/measured", RESULTS / "organism_long" / "measured.json", tmp_path / "measured.json")
    for entry in committed.values():
        assert [t["budget"] for t in entry["readings"]["best"]["n_star"]] == [2e5, 5e5, 1e6, 2e6]
        assert set(entry["readings"]) == {"best", "final"}


@pytest.mark.parametrize("which", ["", "_calibrated", "_calibrated_distance"])
def test_organism_comparisons_follow_from_the_records(tmp_path, which):
    # the organism's easy and hard Q1 sweeps against each committed prediction
    # (llm_runs.organism.compare): the measured frontier and the comparison
    real = "studies/results/organism/real"
    run(["-m", "llm_runs.organism.compare", "--runs", f"easy={real}/easy", "--runs", f"hard={real}/hard",
         "--prediction", f"studies/results/organism_prediction{which}.json",
         "--measured", str(tmp_path / "measured.json"), "--comparison", str(tmp_path / "comparison.json")], tmp_path)
    assert_same("organism_measured", RESULTS / "organism_measured.json", tmp_path / "measured.json")
    assert_same(f"organism_comparison{which}", RESULTS / f"organism_comparison{which}.json",
                tmp_path / "comparison.json")
