"""The answer bank of `recommend --budget` (isosim/predict/presimulated/bank-*.json.gz): what ships is what
recommend would simulate, a budget of the grid reads the same answer as a fresh simulation, a budget between
two grid budgets stays within seed noise of one, and the bank answers without the engine."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from isosim.files import jsonable
from isosim.predict import bank, choice
from isosim.predict import recommend as rec

ROOT = Path(__file__).resolve().parents[1]
CHEAP = (1e4, 2e4)
"""grid budgets whose sweeps take seconds: re-simulated here"""
BETWEEN = (1.4e4, 3e4)
"""budgets between two grid budgets, cheap to simulate fresh"""
EXACT_TOL = 1e-9
"""cells agree to round-off below 1e6 rollouts (see tests/test_presimulated.py)"""
EDGE_SE = 0.5
"""a cell the bank and a fresh simulation disagree on lies within this many se of the band's edge"""


@pytest.fixture
def cold(tmp_path, monkeypatch):
    monkeypatch.setenv("ISOSIM_CACHE", str(tmp_path / "cache"))
    return tmp_path


@pytest.mark.parametrize("preset", bank.PRESETS)
def test_each_bank_ships_every_budget_of_the_plans_recommend_builds(preset):
    doc = bank.load(preset)
    assert doc is not None, f"no bank for {preset} (run scripts/presimulate.py)"
    assert [e["budget"] for e in doc["entries"]] == list(bank.BUDGETS)
    for e in doc["entries"]:
        assert e["plan_id"] == rec.sweep_plan(e["budget"], preset=preset)[0].plan_id, (preset, e["budget"])
        read = bank.decode_read(e["read"])
        got = choice.pick_cell(read["cells"], math.sqrt(2) * read["noise"] / math.sqrt(bank.SEEDS))
        assert tuple(e["pick"]) == got["pick"] or not read["analyses"][e["pick"][1]]["learning"][-1]
    assert bank.path(preset).stat().st_size < 1_000_000  # small: a few hundred kB at most


@pytest.mark.cpu_sensitive
@pytest.mark.parametrize("preset", bank.PRESETS)
def test_a_grid_budget_reads_what_a_fresh_simulation_answers(preset, cold):
    """Re-simulate the bank's cheapest entries: every cell to round-off, and the whole recommendation
    equal to the one recommend simulates (but for where it says it came from)."""
    shipped = {e["budget"]: e for e in bank.load(preset)["entries"]}
    for budget in CHEAP:
        fresh = bank.build_entry(preset, budget)
        a, b = bank.decode_read(shipped[budget]["read"]), bank.decode_read(fresh["read"])
        assert a["cells"].keys() == b["cells"].keys()
        assert max(abs(a["cells"][c] - b["cells"][c]) for c in a["cells"]) < EXACT_TOL
        assert abs(a["noise"] - b["noise"]) < EXACT_TOL
        assert shipped[budget]["pick"] == fresh["pick"]
        from_bank = jsonable(rec.recommend(budget, preset=preset).to_json())
        simulated = jsonable(rec.recommend(budget, preset=preset, bank=False).to_json())
        assert from_bank["bank"] and not simulated["bank"]
        for key in ("sweep_dir", "bank"):
            from_bank.pop(key), simulated.pop(key)
        assert json.dumps(from_bank, sort_keys=True) == json.dumps(simulated, sort_keys=True) or _close(
            from_bank, simulated)


def _close(a, b) -> bool:
    """Equal but for float round-off (another CPU kind)."""
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_close(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(map(_close, a, b))
    if isinstance(a, float) and isinstance(b, float):
        return math.isclose(a, b, rel_tol=1e-7, abs_tol=EXACT_TOL)
    return a == b


@pytest.mark.parametrize("preset", bank.PRESETS)
@pytest.mark.parametrize("budget", BETWEEN)
def test_between_grid_budgets_the_bank_stays_within_seed_noise_of_a_fresh_simulation(preset, budget, cold):
    """Interpolated cells against a fresh sweep to the budget: each cell within one se of the fresh value,
    the pick in the fresh tie band, and every cell the two bands disagree on within EDGE_SE se of the edge."""
    b = rec.recommend(budget, preset=preset)
    f = rec.recommend(budget, preset=preset, bank=False)
    assert "interpolated" in b.bank and not f.bank
    if f.expected_regret is None:  # no learning at the budget: the pick is the smallest n, the band empty
        assert b.n == f.n
        return
    from isosim.sweeps import sweep

    read = choice.read_grid(sweep.load_store(f.sweep_dir)[1], bank.METRIC, bank.N_BOOT)
    got = choice.pick_cell(read["cells"], f.band_se)
    assert got["pick"] == (f.n, f.b_p)
    fresh_band = {(c["n"], c["b_p"]) for c in f.tie_band}
    banked = {(c["n"], c["b_p"]) for c in b.tie_band}
    assert (b.n, b.b_p) in fresh_band, (preset, budget, b.n, b.b_p, sorted(fresh_band))
    for cell in banked ^ fresh_band:
        assert abs(got["regret"][cell] - got["margin"]) <= EDGE_SE * f.band_se, (preset, budget, cell)


def test_past_the_cap_and_off_defaults(cold, monkeypatch):
    """Past the cap the bank's read at the cap answers; a request off recommend's defaults simulates."""
    r = rec.recommend(1e9, preset="hard")
    assert r.simulated_budget == rec.SIM_BUDGET_CAP and "C = 1e7" in r.bank and r.m == int(1e9 // (r.b_p * r.n))
    assert not bank.applies("easy", None, 65536, 128, "val_avg", False, 2)
    assert not bank.applies("easy", None, 4096, None, "val_avg", False, 2)
    assert not bank.applies("easy", None, 65536, None, "val_best", False, 2)
    assert not bank.applies("hard:0.5,easy:0.5", None, 65536, None, "val_avg", False, 2)
    assert bank.applies("very-easy", None, 65536, None, "val_avg", False, 2)


def test_a_stale_bank_is_not_read(cold, monkeypatch):
    """Entries whose plan is not the one recommend builds now (a changed preset) are never read."""
    assert bank.lookup("easy", 3e5, lambda c: "another-plan", rec.SIM_BUDGET_CAP) is None
    got = bank.lookup("easy", 3e5, lambda c: rec.sweep_plan(c, preset="easy")[0].plan_id, rec.SIM_BUDGET_CAP)
    assert [e["budget"] for e in got["entries"]] == [2e5, 5e5] and 0 < got["weight"] < 1


def test_the_bank_answers_without_the_engine(cold):
    """A cold recommend --budget on a built-in preset imports neither torch nor scipy (the engine and the
    fits): what keeps it within a second or two."""
    code = ("import sys; from isosim.predict import recommend as r; x = r.recommend(3e6, preset='very-easy'); "
            "assert x.bank, 'not from the bank'; print(sorted(m for m in ('torch', 'scipy') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True,
                         env={**__import__("os").environ, "PYTHONPATH": str(ROOT)})
    assert out.stdout.strip() == "[]", out.stdout + out.stderr


def test_seed_store_never_overwrites(tmp_path):
    plan_id = bank.explore_plan().plan_id
    out = tmp_path / "sweep"
    out.mkdir()
    (out / "mine.txt").write_text("keep")
    assert not bank.seed_store(plan_id, out) and sorted(p.name for p in out.iterdir()) == ["mine.txt"]
    assert bank.seed_store(plan_id, tmp_path / "fresh") and (tmp_path / "fresh" / "manifest.json").is_file()
