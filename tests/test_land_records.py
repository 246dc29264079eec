"""``scripts/land_records.py``: a finished sweep's records copied over its committed cheap part only
when every committed file is a byte prefix of its run's, every config equal and every run finished."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("land_records", ROOT / "scripts" / "land_records.py")
lr = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(lr)


def _lines(n: int, upto: float) -> bytes:
    """Records every 10 steps and at the last whole step at or below ``upto`` (where a run stops)."""
    step = 16 * n
    at = sorted({*range(0, int(upto) + 1, step * 10), int(upto) // step * step})
    return "".join(json.dumps({"n": n, "b_p": 16, "rollouts": float(r), "val_avg": 0.1 + r / 1e7}) + "\n"
                   for r in at).encode()


@pytest.fixture()
def sweep(tmp_path):
    runs, into = tmp_path / "runs", tmp_path / "committed"
    for n in (2, 8):
        for s in (0, 1):
            name = f"n{n}_bp16_s{s}"
            whole = _lines(n, 1e4)
            cut = b"".join(x + b"\n" for x in whole.splitlines() if json.loads(x)["rollouts"] <= 5e2)
            for folder, text in ((runs / name, whole), (into / name, cut)):
                folder.mkdir(parents=True)
                (folder / "records.jsonl").write_bytes(text)
                (folder / "config.json").write_text(json.dumps({"n": n, "seed": s}))
    return runs, into


def test_a_finished_sweep_lands_and_each_committed_file_stays_its_prefix(sweep, capsys):
    runs, into = sweep
    before = {p.parent.name: p.read_bytes() for p in into.glob("*/records.jsonl")}
    assert lr.main(["--runs", str(runs), "--into", str(into), "--budget", "1e4", "--check"]) == 0
    assert {p.parent.name: p.read_bytes() for p in into.glob("*/records.jsonl")} == before  # --check copies nothing
    assert lr.main(["--runs", str(runs), "--into", str(into), "--budget", "1e4"]) == 0
    for name, cut in before.items():
        after = (into / name / "records.jsonl").read_bytes()
        assert after == (runs / name / "records.jsonl").read_bytes() and after.startswith(cut) and len(after) > len(cut)
    assert "landed 4 run(s)" in capsys.readouterr().out


@pytest.mark.parametrize("damage, words", [
    ("rewrite", "not a prefix"), ("config", "config.json differs"), ("short", "not finished"),
    ("cut", "cut off"), ("missing", "no records under"), ("extra", "not among the committed runs")])
def test_any_problem_is_one_line_and_nothing_is_copied(sweep, capsys, damage, words):
    runs, into = sweep
    f = runs / "n8_bp16_s1" / "records.jsonl"
    if damage == "rewrite":
        f.write_bytes(f.read_bytes().replace(b'"val_avg": 0.1', b'"val_avg": 0.2', 1))
    elif damage == "config":
        (runs / "n8_bp16_s1" / "config.json").write_text(json.dumps({"n": 8, "seed": 9}))
    elif damage == "short":
        f.write_bytes(_lines(8, 5e3))
    elif damage == "cut":
        f.write_bytes(f.read_bytes()[:-5])
    elif damage == "missing":
        f.unlink()
    else:
        (runs / "n4_bp16_s0").mkdir()
        (runs / "n4_bp16_s0" / "records.jsonl").write_bytes(_lines(4, 1e4))
    before = {p: p.read_bytes() for p in into.glob("*/records.jsonl")}
    assert lr.main(["--runs", str(runs), "--into", str(into), "--budget", "1e4"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2 and words in err[0] and "nothing copied" in err[1]
    assert {p: p.read_bytes() for p in into.glob("*/records.jsonl")} == before
