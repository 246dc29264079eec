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
EXACT_TOL = 1e-6
"""cells agree to round-off below 1e6 rollouts (see tests/test_presimulated.py): 2.2e-8 at most between this
machine's AVX-512 and its default (SSE4) kind at 1e4 on easy"""
EDGE_SE = 0.5
"""a cell the bank and a fresh simulation disagree on lies within this many se of the band's edge (measured
at most 0.27 se where the se is not tiny)"""
CELL_SE, CELL_ABS = 2.0, 0.01
"""a cell's value between grid budgets against a fresh simulation: within this many se, or this much of the
metric (the hard presets barely learn at 1e4-3e4, where the se is .0003-.0006)"""


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
    """Re-simulate the bank's cheapest entries. On the CPU kind that made the bank every cell agrees to
    round-off and the whole recommendation is the one recommend simulates (but for where it says it came
    from); on another kind the sweep's fits can land elsewhere (under the default kind a cell at 2e4 on
    easy moved .0087), so there every cell is held within CELL_SE se (or CELL_ABS) of the fresh read and
    the bank's pick within the fresh recommendation's tie band."""
    shipped = {e["budget"]: e for e in bank.load(preset)["entries"]}
    for budget in CHEAP:
        fresh = rec.bank_entry(preset, budget)
        a, b = bank.decode_read(shipped[budget]["read"]), bank.decode_read(fresh["read"])
        assert a["cells"].keys() == b["cells"].keys()
        from_bank = jsonable(rec.recommend(budget, preset=preset).to_json())
        simulated = jsonable(rec.recommend(budget, preset=preset, bank=False).to_json())
        assert from_bank["bank"] and not simulated["bank"]
        for key in ("sweep_dir", "bank"):
            from_bank.pop(key), simulated.pop(key)
        if max(abs(a["cells"][c] - b["cells"][c]) for c in a["cells"]) < EXACT_TOL:  # the kind that made it
            assert abs(a["noise"] - b["noise"]) < EXACT_TOL and shipped[budget]["pick"] == fresh["pick"]
            assert json.dumps(from_bank, sort_keys=True) == json.dumps(simulated, sort_keys=True) or _close(
                from_bank, simulated)
            continue
        se = math.sqrt(2) * b["noise"] / math.sqrt(bank.SEEDS)
        for c in a["cells"]:
            assert abs(a["cells"][c] - b["cells"][c]) <= max(CELL_SE * se, CELL_ABS), (preset, budget, c)
        band = simulated.get("tie_band") or []
        assert from_bank["n"] == simulated["n"] or from_bank["n"] in band, (from_bank["n"], simulated["n"], band)


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
def test_between_grid_budgets_the_bank_stays_near_a_fresh_simulation(preset, budget, cold):
    """A budget between two grid budgets against a fresh sweep to it: every cell within CELL_SE se (or
    CELL_ABS of the metric, where the seed noise is tiny) of the fresh value; the bank's pick inside the
    fresh tie band or within EDGE_SE se of its edge; every cell the two bands disagree on within EDGE_SE se
    (or CELL_ABS / 2) of the edge. Measured on 24 budgets between (docs/performance.md): cells within
    1.6 se on easy and very-easy; picks equal in 21 of 24."""
    from isosim.sweeps import sweep

    b = rec.recommend(budget, preset=preset)
    f = rec.recommend(budget, preset=preset, bank=False)
    assert "not simulated at C" in b.bank and not f.bank
    fresh = choice.read_grid(sweep.load_store(f.sweep_dir)[1], bank.METRIC, bank.N_BOOT)
    banked = bank.lookup(preset, budget, lambda c: rec.sweep_plan(c, preset=preset)[0].plan_id,
                         rec.SIM_BUDGET_CAP)["read"]
    se = f.band_se
    common = [c for c in fresh["cells"] if c in banked["cells"]]
    assert len(common) >= len(fresh["cells"]) - 2
    for c in common:
        assert abs(banked["cells"][c] - fresh["cells"][c]) <= max(CELL_SE * se, CELL_ABS), (preset, budget, c)
    if f.expected_regret is None:  # no learning at the budget: the pick is the smallest n, the band empty
        assert b.n == f.n and not b.tie_band
        return
    got = choice.pick_cell(fresh["cells"], se)
    assert got["pick"] == (f.n, f.b_p)
    edge = max(EDGE_SE * se, CELL_ABS / 2)
    assert got["regret"][(b.n, b.b_p)] <= got["margin"] + edge, (preset, budget, (b.n, b.b_p))
    fresh_band = {(c["n"], c["b_p"]) for c in f.tie_band}
    for cell in {(c["n"], c["b_p"]) for c in b.tie_band} ^ fresh_band:
        assert abs(got["regret"][cell] - got["margin"]) <= edge, (preset, budget, cell)


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
    """A cold recommend --budget on a built-in preset imports neither torch (the engine) nor scipy.optimize
    (the fits; scipy's logistic function is imported only where a saturated n*(C) fit is read): what keeps it
    within a second or two."""
    code = ("import sys; from isosim.predict import recommend as r; x = r.recommend(3e6, preset='very-easy'); "
            "assert x.bank, 'not from the bank'; print(sorted(m for m in ('torch', 'scipy.optimize') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True,
                         env={**__import__("os").environ, "PYTHONPATH": str(ROOT)})
    assert out.stdout.strip() == "[]", out.stdout + out.stderr


def test_seed_store_never_overwrites(tmp_path):
    """A folder of other files gets the shipped sweep beside them (read, not re-simulated); a folder that
    holds any of the sweep's names (a sweep already, or a file so named) is left as it is."""
    plan_id = bank.explore_plan().plan_id
    shipped = sorted(p.name for p in (bank.FOLDER / plan_id).iterdir())
    out = tmp_path / "sweep"
    out.mkdir()
    (out / "mine.txt").write_text("keep")
    assert bank.seed_store(plan_id, out)
    assert sorted(p.name for p in out.iterdir()) == sorted(shipped + ["mine.txt"])
    assert (out / "mine.txt").read_text() == "keep"
    clash = tmp_path / "clash"
    clash.mkdir()
    (clash / "manifest.json").write_text("{}")
    assert not bank.seed_store(plan_id, clash) and sorted(p.name for p in clash.iterdir()) == ["manifest.json"]
    assert (clash / "manifest.json").read_text() == "{}"
    assert bank.seed_store(plan_id, tmp_path / "fresh") and (tmp_path / "fresh" / "manifest.json").is_file()


def test_off_a_terminal_a_simulating_recommend_says_each_stage(cold):
    """Where the bank does not answer, recommend reports each stage to ``log`` (the CLI's stderr off a
    terminal): the sweep's start, the fit."""
    lines = []
    rec.recommend(2e4, preset="easy", quick=True, log=lines.append)
    assert any("simulating" in ln for ln in lines) and any("fitting the frontier" in ln for ln in lines), lines


def test_explore_easy_reads_its_shipped_sweep_and_simulates_nothing(tmp_path, monkeypatch, capsys):
    """``explore --preset easy`` at its defaults copies the shipped sweep into a new folder and only reads it."""
    from cli_helpers import run  # tests/cli_helpers.py

    from isosim.sweeps import store

    def no_engine():
        raise AssertionError("explore --preset easy simulated a sweep that ships with isosim")

    monkeypatch.setattr(store, "_default_simulate", no_engine)
    code, out, err = run(monkeypatch, capsys, "explore", "--preset", "easy", "--out", tmp_path / "e")
    assert code == 0, err
    assert "ships with isosim" in err and (tmp_path / "e" / "frontier.json").is_file()
    assert sorted(p.name for p in (tmp_path / "e" / "records").iterdir()) == ["chunk-00000.parquet"]
