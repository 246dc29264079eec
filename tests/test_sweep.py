"""Sweep plans and the resumable store (isosim.sweeps.sweep), including kill-and-resume acceptance tests."""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from isosim.errors import IsosimError
from isosim.sim.config import SimConfig
from isosim.sweeps.sweep import (
    Cell,
    SweepPlan,
    load_store,
    plan_chunks,
    plan_for_preset,
    plan_q1,
    plan_q2,
    plan_q3,
    powers_of_two,
    run_sweep,
    store_status,
)

ROOT = Path(__file__).resolve().parents[1]
HELPER = Path(__file__).with_name("sweep_kill_helper.py")
_spec = importlib.util.spec_from_file_location("sweep_kill_helper", HELPER)
helper = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(helper)
FakeEngine = helper.FakeEngine


def small_plan(seeds: int = 2, n_values=(4, 8, 16), budget: float = 4096.0) -> SweepPlan:
    """6 runs by default: n in {4, 8, 16}, b_p = 8, two seeds."""
    base = SimConfig(n_train=32, n_val=32, profile="easy")
    return plan_q1(base, n_values, b_p=8, budget=budget, seeds=seeds)


def sorted_records(df: pd.DataFrame) -> pd.DataFrame:
    return df.sort_values(["run_id", "rollouts"], kind="stable").reset_index(drop=True)


# ---------------------------------------------------------------------------------------
# plans
# ---------------------------------------------------------------------------------------


def test_powers_of_two() -> None:
    assert powers_of_two(8, 2048) == [8, 16, 32, 64, 128, 256, 512, 1024, 2048]
    assert powers_of_two(3, 20) == [4, 8, 16]
    assert powers_of_two(1, 1) == [1]
    with pytest.raises(IsosimError):
        powers_of_two(5, 7)
    with pytest.raises(IsosimError):
        powers_of_two(16, 8)


def test_q1_grid_b_max_and_steps() -> None:
    base = SimConfig(n_train=512)
    plan = plan_q1(base, powers_of_two(8, 2048), b_p=32, budget=1e6, seeds=2, b_max=16384)
    assert [c.n for c in plan.cells] == [8, 16, 32, 64, 128, 256, 512]
    assert plan.n_runs == 14
    assert len(plan.dropped) == 2 and all("exceeds b_max = 16384" in r for r in plan.dropped)
    assert plan.dropped[0].startswith("n=1024, b_p=32")
    cfgs = plan.configs()
    assert len(cfgs) == 14 and len({c.run_id for c in cfgs}) == 14
    assert [c.seed for c in cfgs[:2]] == [0, 1]
    for c in cfgs:
        assert c.b_p == 32 and c.budget == 1e6
        assert c.total_steps == int(1e6 // (32 * c.n))


def test_q2_grid_fixed_batch() -> None:
    base = SimConfig(n_train=64)
    plan = plan_q2(base, total_batch=1024, n_values=powers_of_two(8, 2048), budget=1e5, seeds=1)
    assert [(c.n, c.b_p) for c in plan.cells] == [(16, 64), (32, 32), (64, 16), (128, 8),
                                                  (256, 4), (512, 2), (1024, 1)]
    assert {c.b_p * c.n for c in plan.cells} == {1024}
    assert {c.total_steps for c in plan.configs()} == {int(1e5 // 1024)}
    assert any("n=8, b_p=128: b_p exceeds the training set (64 problems)" == r for r in plan.dropped)
    assert any(r.startswith("n=2048: does not divide") for r in plan.dropped)
    with pytest.raises(IsosimError, match="exceeds b_max"):
        plan_q2(base, total_batch=4096, budget=1e5, b_max=2048)


def test_q3_grid_counts_with_caps() -> None:
    base = SimConfig(n_train=512)
    plan = plan_q3(base, powers_of_two(8, 2048), powers_of_two(32, 1024), budget=1e7, seeds=3,
                   b_max=65536)
    # b_p = 1024 > n_train: 9 cells; then b_p * n <= 65536: 9 + 8 + 7 + 6 + 5 = 35 cells
    assert len(plan.cells) == 35 and plan.n_runs == 105
    assert len(plan.dropped) == 9 * 6 - 35
    assert all(c.b_p * c.n <= 65536 and c.b_p <= 512 for c in plan.cells)
    assert sum("exceeds the training set" in r for r in plan.dropped) == 9
    hard = plan_q3(base, powers_of_two(8, 2048), powers_of_two(32, 1024), budget=1e7, b_max=16384)
    assert len(hard.cells) == 7 + 6 + 5 + 4 + 3


def test_budget_below_one_step_is_dropped_and_empty_grid_raises() -> None:
    base = SimConfig(n_train=64)
    plan = plan_q1(base, [8, 16, 32, 64], b_p=32, budget=1000)
    assert [c.n for c in plan.cells] == [8, 16]
    assert plan.dropped == ("n=32, b_p=32: budget 1000 is below one step (1024 rollouts)",
                            "n=64, b_p=32: budget 1000 is below one step (2048 rollouts)")
    with pytest.raises(IsosimError, match="no cell of the grid can run.*below one step"):
        plan_q1(base, [64, 128], b_p=32, budget=1000)
    with pytest.raises(IsosimError, match="seeds"):
        plan_q1(base, [8], b_p=8, budget=1000, seeds=0)


def test_plan_json_round_trip_and_tampering() -> None:
    plan = plan_q3(SimConfig(n_train=64, lr=0.5, extra={"tag": "x"}), [4, 8], [8, 16], budget=5e4,
                   seeds=2, seed=7, b_max=64, label="demo")
    assert plan.cells == (Cell(4, 8, 5e4), Cell(4, 16, 5e4), Cell(8, 8, 5e4))  # 8 x 16 > b_max
    back = SweepPlan.from_json(plan.to_json())
    assert back == plan and back.plan_id == plan.plan_id and hash(back) == hash(plan)
    assert [c.run_id for c in back.configs()] == [c.run_id for c in plan.configs()]
    assert back.dropped == plan.dropped and back.label == "demo"
    assert [c.seed for c in plan.configs()[:2]] == [7, 8]
    doc = json.loads(plan.to_json())
    doc["cells"][0]["budget"] = 6e4
    with pytest.raises(IsosimError, match="does not match its content"):
        SweepPlan.from_json(json.dumps(doc))
    with pytest.raises(IsosimError, match="not a sweep plan"):
        SweepPlan.from_json("[1, 2]")
    with pytest.raises(IsosimError, match="not a sweep plan"):
        SweepPlan.from_json("{nope")


def test_plan_id_is_stable_and_tracks_the_runs() -> None:
    plan = small_plan()
    code = ("from isosim.sim.config import SimConfig; from isosim.sweeps.sweep import plan_q1;"
            "print(plan_q1(SimConfig(n_train=32, n_val=32, profile='easy'), (4, 8, 16), b_p=8,"
            " budget=4096.0, seeds=2).plan_id)")
    env = {**os.environ, "PYTHONHASHSEED": "123", "PYTHONPATH": str(ROOT)}
    other = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                           check=True).stdout.strip()
    assert other == plan.plan_id and len(plan.plan_id) == 12
    # the grid fields of the base do not matter; the label does not either
    base2 = SimConfig(n_train=32, n_val=32, profile="easy", n=2, b_p=3, seed=0)
    assert plan_q1(base2, (4, 8, 16), b_p=8, budget=4096.0, seeds=2, label="x").plan_id == plan.plan_id
    assert small_plan(budget=8192.0).plan_id != plan.plan_id
    assert small_plan(seeds=3).plan_id != plan.plan_id
    assert plan_q1(base2.replace(lr=1.0), (4, 8, 16), b_p=8, budget=4096.0, seeds=2).plan_id != plan.plan_id


def test_plan_for_preset_quick_and_overrides() -> None:
    q1 = plan_for_preset("easy", "q1", quick=True, seeds=3)
    assert q1.question == "q1" and q1.seeds == 2 and [c.n for c in q1.cells] == [4, 16, 64]
    cfg = q1.configs()[0]
    assert cfg.n_train == 128 and cfg.profile == "easy" and cfg.budget <= 2e5
    assert q1.total_rollouts <= 6 * 2e5
    q2 = plan_for_preset("easy", "q2", quick=True)
    assert {c.b_p * c.n for c in q2.cells} == {256}
    q3 = plan_for_preset("hard", "Q3", quick=True, seeds=1, n_train=64, lr=1.0, budget_max=2e4)
    assert len(q3.cells) == 6 and q3.seeds == 1
    assert all(c.n_train == 64 and c.lr == 1.0 and c.budget == 2e4 for c in q3.configs())
    full = plan_for_preset("easy", "q3")
    assert full.seeds == 3 and len(full.cells) == 35
    assert len(plan_for_preset("hard", "q3").cells) == 25  # b_max 16,384 for hard profiles
    with pytest.raises(IsosimError, match="unknown setting 'b_p_values' for q1"):
        plan_for_preset("easy", "q1", quick=True, b_p_values=[8])
    with pytest.raises(IsosimError, match="unknown question"):
        plan_for_preset("easy", "q4")


def test_chunks_respect_batch_keys_and_are_prefix_stable() -> None:
    base = SimConfig(n_train=64, n_val=64)
    cfgs = plan_q1(base, [4, 8, 16, 32], b_p=8, budget=2e4, seeds=3).configs()
    cfgs += plan_q1(base.replace(policy="tabular"), [4, 8], b_p=8, budget=2e4, seeds=2).configs()
    chunks = plan_chunks(cfgs, chunk_size=4)
    assert sorted(c.run_id for ch in chunks for c in ch) == sorted(c.run_id for c in cfgs)
    assert all(len({c.batch_key for c in ch}) == 1 and len(ch) <= 4 for ch in chunks)
    done = {c.run_id for ch in chunks[:2] for c in ch}
    rest = plan_chunks([c for c in cfgs if c.run_id not in done], chunk_size=4)
    assert [[c.run_id for c in ch] for ch in rest] == [[c.run_id for c in ch] for ch in chunks[2:]]
    assert len(plan_chunks(cfgs)) == 2  # defaults: one chunk per batch key at this size
    with pytest.raises(IsosimError):
        plan_chunks(cfgs, chunk_size=0)


# ---------------------------------------------------------------------------------------
# the store, with a fake engine
# ---------------------------------------------------------------------------------------


def test_store_run_then_rerun_is_a_no_op(tmp_path: Path) -> None:
    plan = small_plan()
    fake = FakeEngine()
    df = run_sweep(plan, tmp_path / "s", chunk_size=4, progress=False, simulate_fn=fake)
    assert fake.runs_simulated == 6 and len(fake.calls) == 2
    assert set(df["run_id"]) == {c.run_id for c in plan.configs()}
    assert not df.duplicated(["run_id", "step"]).any()
    expected = pd.concat([helper.fake_records(c) for c in plan.configs()], ignore_index=True)
    assert len(df) == len(expected)
    man = json.loads((tmp_path / "s" / "manifest.json").read_text())
    assert man["plan_id"] == plan.plan_id
    assert [c["file"] for c in man["chunks"]] == ["records/chunk-00000.parquet", "records/chunk-00001.parquet"]
    assert sum(c["rows"] for c in man["chunks"]) == len(df)
    assert sorted(p.name for p in (tmp_path / "s").iterdir()) == [".lock", "manifest.json", "plan.json", "records"]
    again = FakeEngine()
    df2 = run_sweep(plan, tmp_path / "s", chunk_size=4, progress=False, simulate_fn=again)
    assert again.calls == []
    pd.testing.assert_frame_equal(df, df2)
    plan_back, df3 = load_store(tmp_path / "s")
    assert plan_back == plan
    pd.testing.assert_frame_equal(df, df3)
    assert store_status(tmp_path / "s") == {"plan_id": plan.plan_id, "runs_done": 6, "runs": 6,
                                            "chunks": 2, "complete": True}


def test_store_refuses_another_plan(tmp_path: Path) -> None:
    run_sweep(small_plan(), tmp_path, progress=False, simulate_fn=FakeEngine())
    other = small_plan(seeds=3)
    with pytest.raises(IsosimError, match=r"holds a sweep of another plan \(id [0-9a-f]{12}.*use a new --out"):
        run_sweep(other, tmp_path, progress=False, simulate_fn=FakeEngine())


def test_store_refuses_a_folder_in_use(tmp_path: Path) -> None:
    fcntl = pytest.importorskip("fcntl")
    with open(tmp_path / ".lock", "a+b") as fh:
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        with pytest.raises(IsosimError, match="in use by another running sweep"):
            run_sweep(small_plan(), tmp_path, progress=False, simulate_fn=FakeEngine())


def test_resume_cleans_leftovers_and_changes_of_chunk_size(tmp_path: Path) -> None:
    plan = small_plan(seeds=3, n_values=(4, 8, 16, 32))  # 12 runs
    ref = run_sweep(plan, tmp_path / "ref", chunk_size=3, progress=False, simulate_fn=FakeEngine())

    # a store with 2 listed chunks, then a leftover temp file and a finished-but-unlisted chunk
    store = tmp_path / "s"
    cfgs = plan_chunks(plan.configs(), chunk_size=3)
    listed = [c.run_id for ch in cfgs[:2] for c in ch]
    partial = SweepPlan(question=plan.question, base=plan.base, cells=plan.cells[2:], seeds=3)
    assert {c.run_id for c in partial.configs()} == set(listed)
    run_sweep(partial, tmp_path / "partial", chunk_size=3, progress=False, simulate_fn=FakeEngine())
    store.mkdir()
    (store / "records").mkdir()
    (store / "plan.json").write_text(plan.to_json())
    man = json.loads((tmp_path / "partial" / "manifest.json").read_text())
    man["plan_id"] = plan.plan_id
    for c in man["chunks"]:
        (store / c["file"]).write_bytes((tmp_path / "partial" / c["file"]).read_bytes())
    (store / "manifest.json").write_text(json.dumps(man))
    (store / "records" / ".chunk-00002.parquet.999.tmp").write_bytes(b"half a parq")
    (store / "records" / "chunk-00007.parquet").write_bytes(b"finished but never listed")
    (store / "records" / "notes.txt").write_text("the user's own file is left alone")

    fake = FakeEngine()
    df = run_sweep(plan, store, chunk_size=5, progress=False, simulate_fn=fake)  # another chunk size
    assert sorted(r for call in fake.calls for r in call) == sorted(set(c.run_id for c in plan.configs()) - set(listed))
    names = sorted(p.name for p in (store / "records").iterdir())
    assert names == ["chunk-00000.parquet", "chunk-00001.parquet", "chunk-00002.parquet",
                     "chunk-00003.parquet", "notes.txt"]
    pd.testing.assert_frame_equal(sorted_records(df), sorted_records(ref), check_like=True)


def test_engine_output_is_checked_and_a_bad_chunk_is_not_stored(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError, match="do not match the chunk's runs"):
        run_sweep(small_plan(), tmp_path, chunk_size=3, progress=False, simulate_fn=FakeEngine(drop_last=True))
    assert list((tmp_path / "records").iterdir()) == []
    with pytest.raises(IsosimError, match="no finished run yet"):
        load_store(tmp_path)
    assert store_status(tmp_path)["runs_done"] == 0


def test_load_store_dedups_and_checks_chunks(tmp_path: Path) -> None:
    plan = small_plan()
    df = run_sweep(plan, tmp_path, progress=False, simulate_fn=FakeEngine(duplicate=True))
    assert not df.duplicated(["run_id", "step"]).any()
    assert len(df) == sum(len(helper.fake_records(c)) for c in plan.configs())
    man = json.loads((tmp_path / "manifest.json").read_text())
    man["chunks"][0]["rows"] += 1
    (tmp_path / "manifest.json").write_text(json.dumps(man))
    with pytest.raises(IsosimError, match="does not match its manifest entry"):
        load_store(tmp_path)
    (tmp_path / man["chunks"][0]["file"]).write_bytes(b"garbage")
    with pytest.raises(IsosimError, match="cannot read a chunk"):
        load_store(tmp_path)
    with pytest.raises(IsosimError, match="holds no sweep"):
        load_store(tmp_path / "nowhere")


# ---------------------------------------------------------------------------------------
# kill and resume (acceptance)
# ---------------------------------------------------------------------------------------


def _start(out_dir: Path, plan_file: Path, engine: str, delay: float, chunk_size: int) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [sys.executable, str(HELPER), str(out_dir), str(plan_file), engine, str(delay), str(chunk_size)],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    line = proc.stdout.readline().strip()
    if line != "ready":
        proc.kill()
        raise AssertionError(f"helper did not start: {line!r} {proc.stderr.read()}")
    return proc


def _chunk_file_exists(out_dir: Path) -> bool:
    records = out_dir / "records"
    return records.exists() and any(records.glob("chunk-*.parquet"))


def _manifest_lists_a_chunk(out_dir: Path) -> bool:
    try:
        return bool(json.loads((out_dir / "manifest.json").read_text())["chunks"])
    except (OSError, ValueError, KeyError):
        return False


def _wait_for(proc: subprocess.Popen, ready, timeout: float = 120.0) -> None:
    """Poll until ``ready()`` while the helper runs."""
    t0 = time.monotonic()
    while not ready():
        assert proc.poll() is None, f"helper exited early: {proc.stderr.read()}"
        assert time.monotonic() - t0 < timeout, "no chunk appeared"
        time.sleep(0.002)


def _kill_when(proc: subprocess.Popen, out_dir: Path, ready) -> None:
    """Poll until ``ready(out_dir)``, then SIGKILL the helper."""
    _wait_for(proc, lambda: ready(out_dir))
    os.kill(proc.pid, signal.SIGKILL)
    proc.communicate()
    assert proc.returncode == -signal.SIGKILL


def _kill_resume_check(tmp_path: Path, plan: SweepPlan, engine: str, delay: float, chunk_size: int,
                       reference: pd.DataFrame, trigger: str = "manifest") -> None:
    """Start the sweep in a subprocess, SIGKILL it mid-way, rerun it, compare with ``reference``.

    ``trigger``: kill once the manifest lists a chunk (the resume must keep that chunk), or as
    soon as a chunk file appears in records/ (often between the chunk's rename and the
    manifest's: the unlisted chunk must be redone).
    """
    plan_file = tmp_path / "plan.json"
    plan_file.write_text(plan.to_json())
    store = tmp_path / "killed"
    proc = _start(store, plan_file, engine, delay, chunk_size)
    _kill_when(proc, store, _manifest_lists_a_chunk if trigger == "manifest" else _chunk_file_exists)
    status = store_status(store)
    assert status["runs_done"] < status["runs"], f"the kill did not land mid-sweep: {status}"
    before = json.loads((store / "manifest.json").read_text())["chunks"] if status["runs_done"] else []
    if trigger == "manifest":
        assert before, "the manifest listed a chunk before the kill"
    kept = {c["file"]: (store / c["file"]).stat().st_mtime_ns for c in before}
    proc = _start(store, plan_file, engine, 0.0, chunk_size)  # rerun the same command
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    assert store_status(store)["complete"]
    after = json.loads((store / "manifest.json").read_text())["chunks"]
    assert after[: len(before)] == before  # finished chunks kept as they were, not rerun
    assert {f: (store / f).stat().st_mtime_ns for f in kept} == kept
    _, resumed = load_store(store)
    assert not resumed.duplicated(["run_id", "step"]).any()
    pd.testing.assert_frame_equal(sorted_records(resumed), sorted_records(reference), check_like=True)


@pytest.mark.parametrize("trigger", ["manifest", "chunk-file"])
def test_kill_and_resume_fake_engine(tmp_path: Path, trigger: str) -> None:
    plan = small_plan(seeds=4)  # 12 runs, 6 chunks of 2, 0.4 s each
    reference = run_sweep(plan, tmp_path / "ref", chunk_size=2, progress=False, simulate_fn=FakeEngine())
    _kill_resume_check(tmp_path, plan, "fake", 0.4, 2, reference, trigger)


def test_kill_storm_fake_engine(tmp_path: Path) -> None:
    """Kills at random moments (inside writes too): the store never lists a broken chunk."""
    plan = small_plan(seeds=8, n_values=(4, 8, 16, 32))  # 32 runs, 32 chunks, no delay
    reference = run_sweep(plan, tmp_path / "ref", chunk_size=1, progress=False, simulate_fn=FakeEngine())
    plan_file = tmp_path / "plan.json"
    plan_file.write_text(plan.to_json())
    store = tmp_path / "storm"
    rng = np.random.default_rng(0)
    for _ in range(5):
        seen = set((store / "records").glob("chunk-*.parquet")) if store.exists() else set()
        proc = _start(store, plan_file, "fake", 0.0, 1)
        # once this process has written a chunk, kill it at a random moment of the next ones
        _wait_for(proc, lambda: bool(set((store / "records").glob("chunk-*.parquet")) - seen))
        time.sleep(float(rng.uniform(0.0, 0.03)))
        os.kill(proc.pid, signal.SIGKILL)
        proc.communicate()
        if (store / "manifest.json").exists() and store_status(store)["runs_done"]:
            load_store(store)  # every listed chunk reads back and matches its entry
    fake = FakeEngine()
    df = run_sweep(plan, store, chunk_size=1, progress=False, simulate_fn=fake)
    man = json.loads((store / "manifest.json").read_text())
    listed = [r for c in man["chunks"] for r in c["run_ids"]]
    assert sorted(listed) == sorted(c.run_id for c in plan.configs())  # each run exactly once
    assert fake.runs_simulated < 32, "no kill landed after a chunk was written"
    assert not df.duplicated(["run_id", "step"]).any()
    pd.testing.assert_frame_equal(sorted_records(df), sorted_records(reference), check_like=True)
    assert not list(store.rglob("*.tmp"))


def test_kill_and_resume_real_engine(tmp_path: Path) -> None:
    from isosim.sim.engine import simulate

    base = SimConfig(n_train=64, n_val=64, profile="easy", eval_points=5)
    plan = plan_q1(base, [16, 64], b_p=16, budget=2e4, seeds=2)  # 4 short runs (19 and 78 steps)
    reference = run_sweep(plan, tmp_path / "ref", chunk_size=1, progress=False, simulate_fn=simulate)
    assert len(reference) and set(reference["run_id"]) == {c.run_id for c in plan.configs()}
    _kill_resume_check(tmp_path, plan, "real", 1.0, 1, reference)
