"""The curve-fidelity table (studies/results/curve_fidelity.json) recomputed from the committed
records: the measured side and the error arithmetic; the simulated values are cached in the JSON
with their settings. A changed record changes the table."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pytest

from isosim.predict import curve_fidelity as cf
from isosim.validation.adaptive import load_sweep

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "studies" / "results"
DOC = json.loads((RESULTS / "curve_fidelity.json").read_text())


def _close(a, b) -> bool:
    return (math.isnan(a) and math.isnan(b)) or a == pytest.approx(b, rel=1e-9, abs=1e-9)


def test_every_sweep_with_records_is_in_the_table():
    from isosim.validation import plane as pl

    assert set(DOC["sweeps"]) == set(pl.find_sweeps(RESULTS)) and len(DOC["sweeps"]) == 9


@pytest.mark.parametrize("name", sorted(DOC["sweeps"]))
def test_table_recomputed_from_the_records(name):
    sw = load_sweep(RESULTS / name)
    entry = DOC["sweeps"][name]
    meas = cf.measured(sw["runs"], sw["b_p"])
    for sim in DOC["simulators"]:
        got = cf.errors(meas, entry["simulated"][sim])
        want = entry["errors"][sim]
        for kind in ("steps", "rollouts"):
            assert got[kind]["points"] == want[kind]["points"] > 0
            assert _close(got[kind]["mean_abs_se"], want[kind]["mean_abs_se"])
            assert _close(got[kind]["mean_se"], want[kind]["mean_se"])
        for n, per in got["per_n"].items():
            for kind in ("steps", "rollouts"):
                assert per[kind].keys() == want["per_n"][n][kind].keys()
                assert all(_close(per[kind][x], want["per_n"][n][kind][x]) for x in per[kind])


def test_a_changed_record_changes_the_table(tmp_path):
    name = "organism_f8/hard-256"
    folder = tmp_path / "sweep"
    shutil.copytree(RESULTS / name, folder)
    rec = folder / "n8_bp16_s0" / "records.jsonl"
    rows = [json.loads(line) for line in rec.read_text().splitlines() if line.strip()]
    rows[6]["val_avg"] = float(rows[6]["val_avg"]) + 0.1  # one evaluation of one run
    rec.write_text("".join(json.dumps(r) + "\n" for r in rows))
    sw = load_sweep(folder)
    sim = DOC["sweeps"][name]["simulated"]["flat, fitted"]
    got = cf.errors(cf.measured(sw["runs"], sw["b_p"]), sim)
    want = DOC["sweeps"][name]["errors"]["flat, fitted"]
    assert got["rollouts"]["mean_abs_se"] != pytest.approx(want["rollouts"]["mean_abs_se"], abs=1e-6)
    assert got["per_n"]["8"]["steps"] != want["per_n"]["8"]["steps"]
    assert got["per_n"]["4"] == want["per_n"]["4"]  # the other n are untouched


def test_seed_se_pools_the_evaluations():
    seeds = {0: [(0, 0.1), (10, 0.5), (20, 0.6)], 1: [(0, 0.1), (10, 0.7), (20, 0.6)]}
    # variances 0.02 and 0 at the two evaluations after step 0: sqrt(0.01 / 2)
    assert cf.seed_se(seeds) == pytest.approx(math.sqrt(0.01 / 2))
