"""The presets' sweeps shipped for `recommend` (isosim/predict/presimulated/) are the sweeps it would
simulate: the same plans, and records the engine reproduces; a budget past the cap reads them."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from isosim.predict import recommend as rec
from isosim.sweeps import sweep


@pytest.mark.parametrize("preset", rec.PRESIMULATED_PRESETS)
def test_each_shipped_sweep_is_the_plan_recommend_builds(preset):
    plan, _ = rec.sweep_plan(1e12, preset=preset)
    assert max(c.budget for c in plan.cells) == rec.SIM_BUDGET_CAP
    store = rec.PRESIMULATED / plan.plan_id
    assert store.is_dir(), f"{preset}: no shipped sweep {plan.plan_id} (run scripts/presimulate.py)"
    assert json.loads((store / "plan.json").read_text())["plan_id"] == plan.plan_id
    shipped = sweep.load_store(store)[1]
    assert set(shipped["run_id"]) == {c.run_id for c in plan.configs()}  # every run, finished


@pytest.mark.parametrize("preset", rec.PRESIMULATED_PRESETS)
def test_the_engine_reproduces_the_shipped_records(preset):
    """The runs of n >= 256 (a few thousand steps), simulated again in a batch of their own: steps and
    rollouts exactly; val_avg to float round-off, where a last-bit difference between batch shapes can
    flip a sampled draw and move a point by up to a few hundredths (easy: mean .0003, max .026), so
    the check is a mean difference below .002 and none above .05: a change of the engine's or the
    presets' dynamics moves whole curves."""
    from isosim.sim.engine import simulate

    plan, _ = rec.sweep_plan(1e12, preset=preset)
    shipped = sweep.load_store(rec.PRESIMULATED / plan.plan_id)[1]
    cfgs = [c for c in plan.configs() if c.n >= 256]
    fresh = simulate(cfgs)
    diffs = []
    for cfg in cfgs:
        a = shipped[shipped["run_id"] == cfg.run_id].sort_values("step").reset_index(drop=True)
        b = fresh[fresh["run_id"] == cfg.run_id].sort_values("step").reset_index(drop=True)
        assert len(a) == len(b) > 2, cfg.run_id
        assert a["step"].tolist() == b["step"].tolist() and a["rollouts"].tolist() == b["rollouts"].tolist()
        diffs.append(np.abs(a["val_avg"].to_numpy(float) - b["val_avg"].to_numpy(float)))
    d = np.concatenate(diffs)
    assert d.mean() < 0.002 and d.max() < 0.05, (preset, d.mean(), d.max())


def test_a_budget_past_the_cap_reads_the_shipped_sweep_and_simulates_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv("ISOSIM_CACHE", str(tmp_path))
    real = sweep.run_sweep

    def nothing_to_simulate(plan, out, **kw):
        def boom(configs, **_):
            raise AssertionError(f"simulated {len(configs)} runs that ship with isosim")

        return real(plan, out, **{**kw, "simulate_fn": boom})

    monkeypatch.setattr(sweep, "run_sweep", nothing_to_simulate)
    r = rec.recommend(1e12, preset="easy")
    assert r.simulated_budget == rec.SIM_BUDGET_CAP and r.sweep_dir.startswith(str(tmp_path))
    assert isinstance(r.n, int) and r.m == int(1e12 // (r.b_p * r.n))
    assert pd.notna(r.noise_se)
