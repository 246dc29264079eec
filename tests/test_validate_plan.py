"""Validation plans that can test a prediction: B_max, a step minimum, n around n_sat, the recipe
that was simulated, and SLURM launches that fit the model (FSDP), checked before queueing."""

from __future__ import annotations

import json
import sys

import pytest

pytest.importorskip("transformers")

from isosim.errors import IsosimError  # noqa: E402
from llm_runs.launch import validate as val  # noqa: E402

DATA = "../shared/data/math_train.jsonl"  # not read by make_plan
QWEN = "Qwen/Qwen2.5-7B-Instruct"


def predicted(**kw):
    """A prediction as ``validate.predict`` returns it (no simulation)."""
    base = {"source": "preset easy", "budget": 2e6, "n_star": 256, "n_sat": 256.0, "n_tol": 64, "n_tie_hi": 512,
            "b_p": 256, "recipe": "easy", "advised_recipe": "easy", "recipe_mismatch": False, "hard_share": 0.0,
            "b_max": 65536}
    return {**base, **kw}


def plan(tmp_path, pred=None, **kw):
    args = {"model": QWEN, "data": DATA, "budget": 2_000_000, "predicted": pred or predicted(), "settings": {},
            "out": str(tmp_path)}
    return val.make_plan(**{**args, **kw})


def test_plan_respects_b_max_and_min_steps(tmp_path):
    p = plan(tmp_path)
    assert p.ns == [64, 256, 1024], "below, at and above n_sat"
    assert all(r.b_p * r.n <= 65536 for r in p.runs)
    assert all(r.steps >= 20 for r in p.runs)
    assert p.b_p < 256 and any("B_p lowered" in n for n in p.notes)
    # planted: the old planner (B_p 256, 4 steps, no B_max) breaks both limits at n = 1024
    ns, _ = val.plan_ns(256, 2_000_000, 256, min_steps=4)
    assert max(ns) * 256 > 65536


def test_hard_b_max_and_a_budget_too_small(tmp_path):
    p = plan(tmp_path, predicted(b_max=16384))
    assert all(r.b_p * r.n <= 16384 for r in p.runs) and all(r.steps >= 20 for r in p.runs)
    with pytest.raises(IsosimError, match="too small to test anything"):
        plan(tmp_path, budget=200)


def test_no_learning_prediction_centres_on_n_star_and_says_so(tmp_path):
    p = plan(tmp_path, predicted(n_sat=None, n_tol=16, n_star=16))
    assert 16 in p.ns and any("no learning" in n for n in p.notes)


def test_given_n_outside_the_limits_is_refused(tmp_path):
    with pytest.raises(IsosimError, match="B_max"):
        plan(tmp_path, b_p=128, n_list=[1024], budget=100_000_000)
    with pytest.raises(IsosimError, match="below one step"):
        plan(tmp_path, b_p=64, n_list=[1 << 20], b_max=1 << 30)
    # an n given that gets fewer than --min-steps updates is run as asked, and the plan says so
    few = plan(tmp_path, b_p=64, n_list=[2048], b_max=1 << 30)
    assert few.ns == [2048] and any("fewer than --min-steps 20" in n and "kept as asked" in n for n in few.notes)


def test_runs_use_the_simulated_recipe_and_flag_a_mismatch(tmp_path):
    hard_set = predicted(advised_recipe="hard", recipe_mismatch=True, hard_share=0.9)
    p = plan(tmp_path, hard_set)
    assert {r.config["recipe"] for r in p.runs} == {"easy"}, "launched = simulated"
    assert any("paper advises the hard recipe" in n for n in p.notes)
    assert not any("RECIPE MISMATCH" in n for n in p.notes)
    forced = plan(tmp_path / "f", hard_set, settings={"recipe": "hard"})
    assert any("RECIPE MISMATCH" in n for n in forced.notes)
    assert val.launched_recipe({"recipe": "kl-only"}) == {"recipe": "easy", "entropy_coef": 0.0}


def test_model_size_and_distributed_kind(tmp_path):
    assert val.model_params(QWEN) == pytest.approx(7e9)
    assert val.model_params("HuggingFaceTB/SmolLM2-135M") == pytest.approx(1.35e8)
    assert val.model_params("gpt2") is None
    opts = val.SlurmOptions()
    assert val.distributed_kind(QWEN, opts)[0] == "fsdp"
    assert val.distributed_kind("Qwen/Qwen2.5-1.5B-Instruct", opts)[0] == "ddp"
    assert val.distributed_kind(QWEN, val.SlurmOptions(gpus_per_node=1))[0] == "single"
    settings, notes = val.slurm_settings(QWEN, {}, opts)
    assert settings["sampler"] == "vllm" and any("checkpoint" in n for n in notes)
    assert val.slurm_settings(QWEN, {"sampler": "hf"}, opts)[0]["sampler"] == "hf"  # the user's choice stays


def test_fsdp_command_from_this_interpreter_and_checks_before_queueing(tmp_path):
    opts = val.SlurmOptions()
    settings, _ = val.slurm_settings(QWEN, {}, opts)
    p = plan(tmp_path, settings=settings)
    cmd = val.accelerate_command(p.runs[0], opts)
    assert cmd[:3] == [sys.executable, "-m", "accelerate.commands.launch"]
    assert cmd[cmd.index("--config_file") + 1].endswith("configs/accelerate_fsdp_8gpu.yaml")
    assert "--multi_gpu" not in cmd
    val.check_slurm_plan(p, opts)  # B_p divisible by 8, vLLM under FSDP: fine
    with pytest.raises(IsosimError, match="not a multiple"):
        val.check_slurm_plan(p, val.SlurmOptions(gpus_per_node=3))
    hf = plan(tmp_path / "hf", settings={"sampler": "hf"})
    with pytest.raises(IsosimError, match="hf sampler cannot run under FSDP"):
        val.check_slurm_plan(hf, opts)


# --- two validates started together share one cached prediction ------------------------------

def test_two_validates_started_together_both_finish(tmp_path):
    """Both compute the same cached prediction (one sweep store): the second waits for the first
    (or finds it done) instead of failing with "in use by another running sweep"."""
    import os
    import subprocess
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    data = tmp_path / "arith.jsonl"
    env = {**os.environ, "PYTHONPATH": str(root), "ISOSIM_CACHE": str(tmp_path / "cache"), "MPLBACKEND": "Agg",
           "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    subprocess.run([sys.executable, "-m", "llm_runs.problems.make_arith", "--out", str(data), "--count", "400",
                    "--seed", "0"], check=True, env=env, capture_output=True)
    procs = [subprocess.Popen([sys.executable, str(root / "cli.py"), "validate", "--model", QWEN, "--data", str(data),
                               "--budget", "2e6", "--preset", "easy", "--quick", "--dry-run",
                               "--out", str(tmp_path / f"v{i}")], env=env, cwd=tmp_path,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for i in range(2)]
    outs = [p.communicate(timeout=600) for p in procs]
    for p, (out, err) in zip(procs, outs):
        assert p.returncode == 0, err[-2000:]
        assert "dry run: nothing launched" in out
    stores = [d for d in (tmp_path / "cache" / "recommend").iterdir() if d.is_dir()]
    assert len(stores) == 1, stores  # one prediction, computed once and read twice
    plans = [json.loads((tmp_path / f"v{i}" / "plan.json").read_text()) for i in range(2)]
    assert plans[0]["predicted"] == plans[1]["predicted"]


def test_run_sweep_waits_for_the_process_filling_its_store(tmp_path):
    """The store lock held by another process: ``wait=True`` blocks until it is released, the
    default still refuses with one clear line."""
    import subprocess
    import threading

    from isosim.sweeps import sweep

    plan = sweep.plan_for_preset("easy", "q1", quick=True, seeds=1, budget_max=2e3)
    store = tmp_path / "store"
    store.mkdir()
    holder = subprocess.Popen([sys.executable, "-c", (
        "import fcntl, sys; fh = open(sys.argv[1], 'a+b'); fcntl.flock(fh.fileno(), fcntl.LOCK_EX); "
        "print('held', flush=True); sys.stdin.read()"), str(store / ".lock")],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)  # holds the lock until its stdin closes
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(IsosimError, match="in use by another running sweep"):
            sweep.run_sweep(plan, store, progress=False)
        released = threading.Event()

        def release():
            released.set()
            holder.stdin.close()

        threading.Timer(2.0, release).start()
        df = sweep.run_sweep(plan, store, progress=False, wait=True)
        assert released.is_set(), "it ran before the holder let go of the store"
        assert holder.wait(timeout=30) == 0
        assert len(df) > 0
    finally:
        holder.kill()
