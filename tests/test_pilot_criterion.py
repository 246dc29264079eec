"""The learner search's pilot criterion (studies/organism/pilot_criterion.py) on the committed
pilot of the second organism at a constant learning rate, on the sweep's own n = 4 / 64 records
(the sqrt rule) and on made-up runs that probe each half of the rule."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "studies" / "organism"))

import pilot_criterion as pc  # noqa: E402

RESULTS = ROOT / "studies" / "results" / "organism_hard"


def _run(folder: Path, n: int, seed: int, values: list[tuple[int, float]]) -> None:
    d = folder / f"n{n}_bp16_s{seed}"
    d.mkdir(parents=True)
    (d / "records.jsonl").write_text("".join(json.dumps({"step": s, "val_avg": v}) + "\n" for s, v in values))


def test_committed_pilot_clears_the_criterion_and_the_sqrt_sweep_does_not():
    pilot = pc.read(RESULTS / "pilot_constant_lr")
    assert pilot["present"] and pilot["large_mean"] == pytest.approx(0.1985, abs=5e-4)
    assert pilot["small_mean"] == pytest.approx(0.1627, abs=5e-4) and pilot["gap_in_se"] == pytest.approx(2.20, abs=0.01)
    sweep = pc.read(RESULTS / "hard-128")  # the same weights under the sqrt rule (30 evaluations a run)
    assert not sweep["present"] and 0 < sweep["gap_in_se"] < 2


def test_steps_past_the_limit_are_not_read(tmp_path):
    for s in (0, 1):
        _run(tmp_path, 4, s, [(0, 0.03), (1562, 0.20), (1600, 0.90)])
        _run(tmp_path, 64, s, [(0, 0.03), (195, 0.30), (196, 0.01)])
    doc = pc.read(tmp_path)
    assert doc["small_mean"] == pytest.approx(0.20) and doc["large_mean"] == pytest.approx(0.30) and doc["present"]


def test_a_seed_behind_fails_it_even_with_a_large_mean_gap(tmp_path):
    _run(tmp_path, 4, 0, [(10, 0.20)])
    _run(tmp_path, 64, 0, [(10, 0.40)])
    _run(tmp_path, 4, 1, [(10, 0.20)])
    _run(tmp_path, 64, 1, [(10, 0.19)])
    doc = pc.read(tmp_path)
    assert doc["gap_in_se"] > 2 and not doc["present"]


def test_missing_runs_exit_2(tmp_path, capsys):
    assert pc.main([str(tmp_path / "none")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error:") and err.count("\n") == 1
